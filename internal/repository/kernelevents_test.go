package repository

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/scheme"
	"github.com/nbkube/nbkube/internal/testenv"
)

// TestKernelEvents_TellDeathsAndCullsFromTheKernelsStatus watches Kernels through a cache
// of the API server's role, as a replica does, while their status changes as the
// controllers change it: an unasked restart and a failure are "died", with their reasons,
// once each; a write of outputs with no client is "outputs_written", once each; a Kernel deleted with the culler's condition is "culled"; one shut down tells
// nothing.
func TestKernelEvents_TellDeathsAndCullsFromTheKernelsStatus(t *testing.T) {
	admin, _, ns, cfg := apiServersRole(t)
	c, err := cache.New(cfg, cache.Options{Scheme: scheme.New(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	type heard struct {
		owner string
		data  map[string]any
	}
	got := make(chan heard, 10)
	go func() {
		_ = (&KernelEvents{Informers: c}).Watch(ctx, func(owner string, data map[string]any) { got <- heard{owner, data} })
	}()

	kernel := func(name string) *nbv1.Kernel {
		k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: nbv1.KernelParameters{Owner: "ann", KernelSpec: "python3"}}
		if err := admin.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	setCondition := func(k *nbv1.Kernel, typ, reason, msg string) {
		t.Helper()
		meta.SetStatusCondition(&k.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, Message: msg})
		if err := admin.Status().Update(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what string, want map[string]any) {
		t.Helper()
		select {
		case h := <-got:
			if h.owner != "ann" || len(h.data) != len(want) {
				t.Errorf("%s: heard %s's %v, want ann's %v", what, h.owner, h.data, want)
				return
			}
			for k, v := range want {
				if h.data[k] != v {
					t.Errorf("%s: heard %v, want %v", what, h.data, want)
					return
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: heard nothing", what)
		}
	}
	silence := func(what string) {
		t.Helper()
		select {
		case h := <-got:
			t.Errorf("%s: heard %v", what, h.data)
		case <-time.After(500 * time.Millisecond):
		}
	}

	// The cache must see the kernel before it changes, as a replica that runs does.
	k1 := kernel("k1")
	testenv.Eventually(t, "the cache sees the kernel", 10*time.Second, func() error {
		return c.Get(ctx, client.ObjectKeyFromObject(k1), &nbv1.Kernel{})
	})
	silence("a new kernel")
	setCondition(k1, nbv1.ConditionRestarted, string(nbv1.ReasonKernelDied), "the kernel process was killed by SIGKILL (restart 1)")
	expect("a death", map[string]any{"action": "died", "kernel_id": "k1", "kernel_name": "python3", "reason": "KernelDied", "msg": "the kernel process was killed by SIGKILL (restart 1)"})
	k1.Status.ExecutionState = nbv1.ExecutionStateIdle
	if err := admin.Status().Update(ctx, k1); err != nil {
		t.Fatal(err)
	}
	silence("another change after the same death")
	setCondition(k1, nbv1.ConditionRestarted, string(nbv1.ReasonKernelDied), "the kernel process was killed by SIGKILL (restart 2)")
	expect("a second death", map[string]any{"action": "died", "kernel_id": "k1", "kernel_name": "python3", "reason": "KernelDied", "msg": "the kernel process was killed by SIGKILL (restart 2)"})
	setCondition(k1, nbv1.ConditionFailed, "OOMKilled", "the kernel's container ran out of memory")
	expect("a failure", map[string]any{"action": "died", "kernel_id": "k1", "kernel_name": "python3", "reason": "OOMKilled", "msg": "the kernel's container ran out of memory"})
	wrote := metav1.NewTime(time.Now().Truncate(time.Second))
	k1.Status.OutputsWritten = &nbv1.OutputsWritten{Time: wrote, Notebook: "sub/nb.ipynb", Cells: 2, Writes: 1}
	if err := admin.Status().Update(ctx, k1); err != nil {
		t.Fatal(err)
	}
	expect("a write of outputs", map[string]any{"action": "outputs_written", "kernel_id": "k1", "kernel_name": "python3", "path": "sub/nb.ipynb", "cells": 2})
	k1.Status.OutputsWritten.Writes = 2
	if err := admin.Status().Update(ctx, k1); err != nil {
		t.Fatal(err)
	}
	expect("a second write in the same second", map[string]any{"action": "outputs_written", "kernel_id": "k1", "kernel_name": "python3", "path": "sub/nb.ipynb", "cells": 2})
	k1.Status.ExecutionState = nbv1.ExecutionStateBusy
	if err := admin.Status().Update(ctx, k1); err != nil {
		t.Fatal(err)
	}
	silence("another change after the same write")
	setCondition(k1, nbv1.ConditionCulled, string(nbv1.ReasonIdleTimeout), "idle for 1h")
	silence("the culler's condition before the delete")
	if err := admin.Delete(ctx, k1); err != nil {
		t.Fatal(err)
	}
	expect("a cull", map[string]any{"action": "culled", "kernel_id": "k1", "kernel_name": "python3", "reason": "IdleTimeout", "msg": "idle for 1h"})

	k2 := kernel("k2")
	testenv.Eventually(t, "the cache sees the second kernel", 10*time.Second, func() error {
		return c.Get(ctx, client.ObjectKeyFromObject(k2), &nbv1.Kernel{})
	})
	if err := admin.Delete(ctx, k2); err != nil {
		t.Fatal(err)
	}
	silence("a kernel shut down")
}
