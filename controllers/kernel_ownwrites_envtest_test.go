package controllers_test

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nbkube/nbkube/controllers"
	"github.com/nbkube/nbkube/internal/agentapi"
)

// conflictCount counts the status writes that lost to a newer version of their object.
type conflictCount struct {
	client.Client
	n *atomic.Int32
}

func (c conflictCount) Status() client.SubResourceWriter {
	return conflictCountWriter{SubResourceWriter: c.Client.Status(), n: c.n}
}

type conflictCountWriter struct {
	client.SubResourceWriter
	n *atomic.Int32
}

func (w conflictCountWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	err := w.SubResourceWriter.Apply(ctx, obj, opts...)
	if apierrors.IsConflict(err) {
		w.n.Add(1)
	}
	return err
}

// A reconcile that reads the Kernel from a cache that has not seen the controller's own
// status write of a moment ago (as when a starting kernel's pod changes in quick steps)
// writes on top of that write: it does not lose to it and write a second time.
func TestKernel_AReconcileFromACacheBehindItsOwnWriteDoesNotConflict(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "python3")
	create(t, kernelSpec(ns, "python3"), k)
	// The suite's agents know nothing of this address: the suite's controller keeps the
	// status as it finds it, and only the reconciler below changes it.
	const ip = "10.20.0.10"
	runningKernel(t, k, ip)
	if err := get(k); err != nil {
		t.Fatal(err)
	}
	cached := k.DeepCopy() // what the reconciler's cache holds throughout

	report := &agentDouble{}
	active := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	var conflicts atomic.Int32
	r := &controllers.KernelReconciler{
		Client: conflictCount{Client: staleKernels{Client: k8sClient, kernel: cached}, n: &conflicts}, APIReader: k8sClient,
		Recorder: events.NewFakeRecorder(10), Clock: clk, Rand: rand.Reader, Options: opts,
		Agents: report, StatusInterval: statusInterval,
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(k)}
	for connections := 1; connections <= 3; connections++ {
		report.report(ip, &agentapi.Status{ExecutionState: "busy", LastActivity: active, Connections: connections, Ready: true})
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if err := get(k); err != nil {
			t.Fatal(err)
		}
		if k.Status.Connections != int32(connections) {
			t.Fatalf("after report %d the live status has %d connections", connections, k.Status.Connections)
		}
	}
	if n := conflicts.Load(); n != 0 {
		t.Errorf("%d status writes lost to the reconciler's own earlier writes", n)
	}
}
