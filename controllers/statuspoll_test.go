package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestStatusPollInterval_CapsTheRateOfAllPolls(t *testing.T) {
	for _, c := range []struct {
		running int
		max     float64
		want    time.Duration
	}{
		{1, 100, 10 * time.Second},
		{1000, 100, 10 * time.Second},
		{2000, 100, 20 * time.Second},
		{10000, 100, 100 * time.Second},
		{10000, 0, 10 * time.Second},
	} {
		if got := statusPollInterval(10*time.Second, c.running, c.max); got != c.want {
			t.Errorf("%d running, at most %v/s: every %s, want %s", c.running, c.max, got, c.want)
		}
	}
	var r kernelMemory
	a, b := types.NamespacedName{Name: "a"}, types.NamespacedName{Name: "b"}
	if r.markRunning(a, true) != 1 || r.markRunning(b, true) != 2 || r.markRunning(a, true) != 2 || r.markRunning(a, false) != 1 || r.markRunning(a, false) != 1 {
		t.Error("the count of running kernels is off")
	}
}
