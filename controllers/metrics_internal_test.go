package controllers

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
)

// A Kernel deleted and made again under its name with another spec, between two reconciles,
// moves its bytes from the old spec's sum to the new one's.
func TestReplayShare_AKernelMadeAgainUnderAnotherSpecMovesItsBytes(t *testing.T) {
	var h kernelMemory
	key := types.NamespacedName{Namespace: "ns", Name: "k"}
	held := func(spec string) float64 {
		var m dto.Metric
		if err := kernelReplayBytes.WithLabelValues(spec).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetGauge().GetValue()
	}
	h.setReplay(key, "held-old", 700)
	h.setReplay(types.NamespacedName{Namespace: "ns", Name: "other"}, "held-old", 50)
	h.setReplay(key, "held-new", 300)
	if o, n := held("held-old"), held("held-new"); o != 50 || n != 300 {
		t.Errorf("old spec %v, new spec %v; want 50 and 300", o, n)
	}
	h.forgetReplay(key)
	h.forget(key)
	if o, n := held("held-old"), held("held-new"); o != 50 || n != 0 {
		t.Errorf("after forget: old spec %v, new spec %v; want 50 and 0", o, n)
	}
}
