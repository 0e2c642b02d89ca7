package localnode

import "testing"

// A sandbox's flows out are bounded: past maxFlows a new one is refused until one ends.
func TestRouteOutStack_BoundsTheFlowsOut(t *testing.T) {
	var r routeOutStack
	for i := 0; i < maxFlows; i++ {
		if !r.take() {
			t.Fatalf("flow %d refused below the bound", i+1)
		}
	}
	if r.take() {
		t.Fatal("a flow past maxFlows was taken")
	}
	r.done()
	if !r.take() {
		t.Fatal("a flow was refused after one ended")
	}
}
