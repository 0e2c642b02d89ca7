package localnode

import (
	"testing"
)

func TestAddressPool_HandsOutDistinctAddressesAcrossPoolsAndReusesReleasedOnes(t *testing.T) {
	dir := t.TempDir()
	a, b := newAddressPool(dir), newAddressPool(dir) // two nodes on one machine
	first, err := a.allocate()
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.allocate()
	if err != nil {
		t.Fatal(err)
	}
	third, err := a.allocate()
	if err != nil {
		t.Fatal(err)
	}
	if first != "127.0.0.2" || second != "127.0.0.3" || third != "127.0.0.4" {
		t.Fatalf("allocated %s, %s, %s; want 127.0.0.2, 127.0.0.3, 127.0.0.4", first, second, third)
	}
	a.release(first)
	again, err := b.allocate()
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Errorf("after releasing %s the next address is %s", first, again)
	}
	a.release("not-an-address")
	for _, addr := range []string{second, third, again} {
		a.release(addr)
		b.release(addr)
	}
}
