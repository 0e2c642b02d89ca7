package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

func TestOwnWrites_CatchUpOnlyFromVersionsOurWritesReplaced(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "k"}
	at := func(rv string, st nbv1.KernelStatus) *nbv1.Kernel {
		return &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Name: "k", Namespace: "ns", ResourceVersion: rv}, Status: st}
	}
	pending := nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateStarting}
	addressed := nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateStarting, PodIP: "10.0.0.7"}
	ready := nbv1.KernelStatus{ExecutionState: nbv1.ExecutionStateIdle, PodIP: "10.0.0.7"}

	var o kernelMemory
	o.wrote(key, "10", at("11", pending))
	o.wrote(key, "11", at("12", addressed))
	for _, rv := range []string{"10", "11"} {
		k := at(rv, nbv1.KernelStatus{})
		o.catchUp(key, k)
		if k.ResourceVersion != "12" || k.Status.PodIP != "10.0.0.7" {
			t.Errorf("a cache at %s, behind our two writes: caught up to %s %+v, want 12 with the address", rv, k.ResourceVersion, k.Status)
		}
	}
	// Written on top of a version someone else made: the versions before it are no longer ours.
	o.wrote(key, "14", at("15", ready))
	k := at("12", addressed)
	o.catchUp(key, k)
	if k.ResourceVersion != "12" || k.Status.ExecutionState != nbv1.ExecutionStateStarting {
		t.Errorf("a cache at 12, before another's write 13-14: changed to %s %+v", k.ResourceVersion, k.Status)
	}
	// That look found the cache elsewhere: the record went, and a later look at 14 changes nothing.
	k = at("14", addressed)
	o.catchUp(key, k)
	if k.ResourceVersion != "14" {
		t.Errorf("after the record went: changed to %s", k.ResourceVersion)
	}

	o.wrote(key, "20", at("21", ready))
	k = at("21", ready)
	o.catchUp(key, k) // the cache saw the write
	k = at("20", pending)
	o.catchUp(key, k)
	if k.ResourceVersion != "20" {
		t.Errorf("a version read after the cache had caught up was changed to %s", k.ResourceVersion)
	}
	o.wrote(key, "30", at("31", ready))
	o.forget(key)
	k = at("30", pending)
	o.catchUp(key, k)
	if k.ResourceVersion != "30" {
		t.Errorf("a forgotten kernel was changed to %s", k.ResourceVersion)
	}
}
