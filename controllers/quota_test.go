package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/controllers"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/quota"
)

// The controllers are the gate every Kernel and Cluster meets, however it was made: these
// tests make them directly, as kubectl would, with no API server reserving room first.

func i32(n int32) *int32 { return &n }

func userPolicy(ns, name string, spec nbv1.UserPolicySpec) *nbv1.UserPolicy {
	return &nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

// kernelOf is a Kernel of owner, as kubectl would make it.
func kernelOf(ns, name, spec, owner string) *nbv1.Kernel {
	k := kernel(ns, name, spec)
	k.Spec.Owner = nbv1.Owner(owner)
	return k
}

// userUsage waits until user's ledger satisfies cond.
func userUsage(t *testing.T, ns, user string, cond func(*nbv1.UserUsage) error) {
	t.Helper()
	u := &nbv1.UserUsage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nbv1.UsageName(nbv1.Owner(user))}}
	eventually(t, "usage of "+user, func() error {
		if err := get(u); err != nil {
			return err
		}
		return cond(u)
	})
}

// reserved is a condition on a ledger: it holds exactly the kernels named, and its kernel
// summary is kernels.
func reserved(kernels string, names ...string) func(*nbv1.UserUsage) error {
	slices.Sort(names)
	return func(u *nbv1.UserUsage) error {
		var got []string
		for _, r := range u.Spec.Reservations {
			got = append(got, string(r.Kind)+"/"+r.Name)
		}
		var want []string
		for _, n := range names {
			want = append(want, string(nbv1.ReservationKernel)+"/"+n)
		}
		if !slices.Equal(got, want) || u.Status.Kernels != kernels {
			return fmt.Errorf("reservations %v, kernels %q; want %v, %q", got, u.Status.Kernels, want, kernels)
		}
		return nil
	}
}

// hasNoPod fails the test if the kernel has a pod.
func hasNoPod(t *testing.T, k *nbv1.Kernel) {
	t.Helper()
	err := get(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}})
	if !apierrors.IsNotFound(err) {
		t.Errorf("kernel %s has a pod (%v)", k.Name, err)
	}
}

// failedFor is the kernel's Failed condition when it is True for reason, else nil.
func failedFor(k *nbv1.Kernel, reason nbv1.ConditionReason) *metav1.Condition {
	c := meta.FindStatusCondition(k.Status.Conditions, nbv1.ConditionFailed)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(reason) {
		return nil
	}
	return c
}

// annAtHerLimit makes three Kernels of ann, whose policy allows her two, and waits until one
// of them is refused. It returns the two that got pods and the refused one, which has none.
func annAtHerLimit(t *testing.T, ns string) (admitted []*nbv1.Kernel, refused *nbv1.Kernel) {
	t.Helper()
	create(t, kernelSpec(ns, "python3"),
		userPolicy(ns, "ann", nbv1.UserPolicySpec{Users: []string{"ann"}, Limits: nbv1.UserLimits{Kernels: i32(2)}}))
	var all []*nbv1.Kernel
	for i := range 3 {
		k := kernelOf(ns, fmt.Sprintf("ann-%d", i), "python3", "ann")
		create(t, k)
		all = append(all, k)
	}
	eventually(t, "one of ann's kernels refused", func() error {
		admitted, refused = nil, nil
		for _, k := range all {
			if err := get(k); err != nil {
				return err
			}
			if failedFor(k, nbv1.ReasonQuotaExceeded) == nil {
				admitted = append(admitted, k)
				continue
			}
			if refused != nil {
				return fmt.Errorf("%s and %s both refused", refused.Name, k.Name)
			}
			refused = k
		}
		if refused == nil {
			return errors.New("none refused")
		}
		return nil
	})
	// The reconcile that refused it wrote the condition after deciding on no pod.
	hasNoPod(t, refused)
	for _, k := range admitted {
		kernelPod(t, k)
	}
	return admitted, refused
}

// A user's policy holds Kernels made with kubectl to its limit: the one too many gets no pod
// and says which limit; a user no policy names is not limited.
func TestQuota_KubectlKernelsAreHeldToTheirOwnersLimit(t *testing.T) {
	ns := namespace(t)
	admitted, refused := annAtHerLimit(t, ns)
	kernelCondition(t, refused, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonQuotaExceeded)
	if c := failedFor(refused, nbv1.ReasonQuotaExceeded); !strings.Contains(c.Message, "user ann") || !strings.Contains(c.Message, "kernels: 2 of 2") {
		t.Errorf("Failed message %q does not name the user and the limit", c.Message)
	}
	if refused.Status.ExecutionState != nbv1.ExecutionStateDead {
		t.Errorf("refused kernel's execution state %q, want dead", refused.Status.ExecutionState)
	}
	userUsage(t, ns, "ann", reserved("2/2", admitted[0].Name, admitted[1].Name))

	// bob has no policy (and there is none for all users): his kernels are counted, not held.
	var bobs []string
	for i := range 3 {
		k := kernelOf(ns, fmt.Sprintf("bob-%d", i), "python3", "bob")
		create(t, k)
		kernelPod(t, k)
		bobs = append(bobs, k.Name)
	}
	for _, name := range bobs {
		k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		kernelCondition(t, k, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonPodPending)
	}
	userUsage(t, ns, "bob", reserved("3", bobs...))
	hasNoPod(t, refused)
}

// Deleting one of ann's kernels frees its room, and her refused kernel takes it without
// waiting for its next periodic look.
func TestQuota_ADeletedKernelsRoomGoesToARefusedOne(t *testing.T) {
	ns := namespace(t)
	admitted, refused := annAtHerLimit(t, ns)
	userUsage(t, ns, "ann", reserved("2/2", admitted[0].Name, admitted[1].Name))

	// A reservation whose Kernel is missing is kept for a minute from its making (an API
	// server reserves before it creates the Kernel). The controllers' clock moves past that,
	// so that the deleted kernel's room is freed as soon as its deletion is seen.
	clk.Step(2 * time.Minute)
	if err := k8sClient.Delete(context.Background(), admitted[0]); err != nil {
		t.Fatal(err)
	}
	// Within the suite's wait, far shorter than the minute between periodic looks.
	kernelPod(t, refused)
	eventually(t, "the refused kernel's failure gone", func() error {
		if err := get(refused); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(refused.Status.Conditions, nbv1.ConditionFailed); c != nil {
			return fmt.Errorf("Failed %s: %s", c.Reason, c.Message)
		}
		return nil
	})
	kernelCondition(t, refused, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonPodPending)
	userUsage(t, ns, "ann", reserved("2/2", admitted[1].Name, refused.Name))
}

// Raising the limit admits a refused kernel at once: the ledger's summary follows the policy,
// and that change brings the user's refused kernels back.
func TestQuota_RaisingTheLimitAdmitsARefusedKernel(t *testing.T) {
	ns := namespace(t)
	admitted, refused := annAtHerLimit(t, ns)
	update(t, userPolicy(ns, "ann", nbv1.UserPolicySpec{}), func(p *nbv1.UserPolicy) { p.Spec.Limits.Kernels = i32(3) })
	// Within the suite's wait, far shorter than the minute between periodic looks.
	kernelPod(t, refused)
	kernelCondition(t, refused, nbv1.ConditionReady, metav1.ConditionFalse, nbv1.ReasonPodPending)
	userUsage(t, ns, "ann", reserved("3/3", admitted[0].Name, admitted[1].Name, refused.Name))
}

// A policy's default resources go to the kernel container of a kernel whose spec sets none
// of them; what the spec sets, it keeps.
func TestQuota_PolicyDefaultResourcesFillWhatTheSpecLeavesUnset(t *testing.T) {
	ns := namespace(t)
	sized := kernelSpec(ns, "sized")
	sized.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	create(t, kernelSpec(ns, "plain"), sized, userPolicy(ns, "defaults", nbv1.UserPolicySpec{AllUsers: true,
		DefaultResources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}))

	for _, tc := range []struct {
		spec, cpu, memory string
	}{{"plain", "250m", "256Mi"}, {"sized", "2", "256Mi"}} {
		k := kernel(ns, "k-"+tc.spec, tc.spec)
		create(t, k)
		requests := kernelPod(t, k).Spec.Containers[0].Resources.Requests
		if cpu, memory := requests[corev1.ResourceCPU], requests[corev1.ResourceMemory]; cpu.String() != tc.cpu || memory.String() != tc.memory {
			t.Errorf("kernel of %s: kernel container requests cpu %s memory %s, want %s and %s", tc.spec, cpu.String(), memory.String(), tc.cpu, tc.memory)
		}
	}
	// The ledger counts what the pods request.
	userUsage(t, ns, "alice", func(u *nbv1.UserUsage) error {
		if u.Status.CPU != "2250m" || u.Status.Memory != "512Mi" {
			return fmt.Errorf("cpu %s memory %s", u.Status.CPU, u.Status.Memory)
		}
		return nil
	})
}

// A kernel of a spec its owner's policy does not allow gets no pod and says why.
func TestQuota_KernelOfASpecThePolicyDoesNotAllowGetsNoPod(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"), kernelSpec(ns, "gpu"),
		userPolicy(ns, "python-only", nbv1.UserPolicySpec{AllUsers: true, KernelSpecs: []string{"python3"}}))
	denied := kernel(ns, "k-gpu", "gpu")
	allowed := kernel(ns, "k-python", "python3")
	create(t, denied, allowed)
	kernelCondition(t, denied, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonKernelSpecNotAllowed)
	if c := failedFor(denied, nbv1.ReasonKernelSpecNotAllowed); !strings.Contains(c.Message, `"gpu"`) || !strings.Contains(c.Message, "python3") {
		t.Errorf("Failed message %q does not name the spec and the allowed ones", c.Message)
	}
	hasNoPod(t, denied)
	kernelPod(t, allowed)
	userUsage(t, ns, "alice", reserved("1", allowed.Name))
}

// A cluster whose engines would take its owner past the engines limit starts none and says
// why; scaled within the limit, its engines start; stopped, it frees its room.
func TestQuota_ClusterEnginesAreHeldToTheirOwnersLimit(t *testing.T) {
	ns := namespace(t)
	create(t, userPolicy(ns, "alice", nbv1.UserPolicySpec{Users: []string{"alice"}, Limits: nbv1.UserLimits{Engines: i32(2)}}))
	c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1"}, Spec: nbv1.ClusterParameters{Owner: "alice", Engines: 3}}
	create(t, c)
	const ip = "10.60.0.1"
	runPod(t, &clusterPods(t, c, builder.ComponentClusterController, 1)[0], ip)
	hub.answer(ip, nil)
	clusterCondition(t, c, nbv1.ConditionFailed, metav1.ConditionTrue, nbv1.ReasonQuotaExceeded)
	if f := meta.FindStatusCondition(c.Status.Conditions, nbv1.ConditionFailed); !strings.Contains(f.Message, "engines: 0 of 2") {
		t.Errorf("Failed message %q does not name the limit", f.Message)
	}
	// The reconcile that wrote the refusal started no engine.
	clusterPods(t, c, builder.ComponentClusterEngine, 0)
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: nbv1.UsageName("alice")}, &nbv1.UserUsage{}); !apierrors.IsNotFound(err) {
		t.Errorf("a refused cluster has room in the ledger (%v)", err)
	}

	update(t, c, func(c *nbv1.Cluster) { c.Spec.Engines = 2 })
	clusterPods(t, c, builder.ComponentClusterEngine, 2)
	eventually(t, "the cluster's failure gone", func() error {
		if err := get(c); err != nil {
			return err
		}
		if f := meta.FindStatusCondition(c.Status.Conditions, nbv1.ConditionFailed); f != nil {
			return fmt.Errorf("Failed %s: %s", f.Reason, f.Message)
		}
		return nil
	})
	userUsage(t, ns, "alice", func(u *nbv1.UserUsage) error {
		if len(u.Spec.Reservations) != 1 || u.Status.Engines != "2/2" {
			return fmt.Errorf("reservations %+v, engines %q", u.Spec.Reservations, u.Status.Engines)
		}
		return nil
	})

	update(t, c, func(c *nbv1.Cluster) { c.Spec.State = nbv1.ClusterStopped })
	userUsage(t, ns, "alice", func(u *nbv1.UserUsage) error {
		if len(u.Spec.Reservations) != 0 || u.Status.Engines != "0/2" {
			return fmt.Errorf("reservations %+v, engines %q", u.Spec.Reservations, u.Status.Engines)
		}
		return nil
	})
}

// Without a UserPolicy in the namespace quotas are off: running kernels and clusters write
// no ledger.
func TestQuota_WithoutPoliciesNoLedgerIsWritten(t *testing.T) {
	ns := namespace(t)
	k := kernel(ns, "k1", "python3")
	create(t, kernelSpec(ns, "python3"), k)
	// Ready takes reconciles of the kernel with its pod, those that record a running kernel.
	runningKernel(t, k, "10.60.1.1")
	startCluster(t, ns, "c1", 1, "10.60.1.2")
	var list nbv1.UserUsageList
	if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("%d ledgers written with quotas off: %s", len(list.Items), list.Items[0].Name)
	}
	// The first policy: what already runs is recorded, over the limit as it may be.
	create(t, userPolicy(ns, "none", nbv1.UserPolicySpec{AllUsers: true, Limits: nbv1.UserLimits{Kernels: i32(0)}}))
	userUsage(t, ns, "alice", func(u *nbv1.UserUsage) error {
		if u.Status.Kernels != "1/0" || u.Status.Engines != "1" {
			return fmt.Errorf("kernels %q engines %q, want the running kernel and engine recorded", u.Status.Kernels, u.Status.Engines)
		}
		return nil
	})
}

// A reconcile that read a kernel before an API server deleted it and gave its room back does
// not record the room again: held until the usage controller's grace for starts under way
// passed, it would refuse the owner's next start (a session's kernel change, at the limit).
func TestQuota_AReconcileOfADeletedKernelDoesNotHoldItsRoomAgain(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"), userPolicy(ns, "ann-limit", nbv1.UserPolicySpec{Users: []string{"ann"}, Limits: nbv1.UserLimits{Kernels: i32(2)}}))
	k := kernelOf(ns, "k1", "python3", "ann")
	create(t, k)
	pod := kernelPod(t, k)
	userUsage(t, ns, "ann", reserved("1/2", k.Name))
	read := k.DeepCopy() // as the reconcile's cache gave it, before the deletion
	if err := get(read); err != nil {
		t.Fatal(err)
	}
	// An API server deletes the kernel, then gives its room back.
	if err := k8sClient.Delete(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	ledger := &quota.Ledger{Client: k8sClient, Reader: k8sClient, APIReader: k8sClient, Namespace: ns}
	if err := ledger.Release(context.Background(), "ann", nbv1.ReservationKernel, k.Name); err != nil {
		t.Fatal(err)
	}
	userUsage(t, ns, "ann", reserved("0/2"))
	r := &controllers.KernelReconciler{Client: k8sClient, APIReader: k8sClient, Quota: ledger}
	r.RecordRoomForTest(context.Background(), read, pod)
	u := &nbv1.UserUsage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nbv1.UsageName("ann")}}
	if err := get(u); err != nil {
		t.Fatal(err)
	}
	if err := reserved("0/2")(u); err != nil {
		t.Errorf("after a reconcile of the deleted kernel: %v", err)
	}
}

// readThen is a reader around the cache that runs then once, right after its first read of a
// Kernel: what another writer does between a reconcile's read and its write.
type readThen struct {
	client.Reader
	then func()
}

func (r *readThen) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if _, ok := obj.(*nbv1.Kernel); ok && r.then != nil {
		then := r.then
		r.then = nil
		then()
	}
	return err
}

// TestQuota_AKernelDeletedWhileItsRoomIsRecordedDoesNotHoldIt: the API server deletes the
// kernel and gives its room back between the reconcile's read of the live kernel and its
// write of the room; the room is still free after the reconcile.
func TestQuota_AKernelDeletedWhileItsRoomIsRecordedDoesNotHoldIt(t *testing.T) {
	ns := namespace(t)
	create(t, kernelSpec(ns, "python3"), userPolicy(ns, "ann-limit", nbv1.UserPolicySpec{Users: []string{"ann"}, Limits: nbv1.UserLimits{Kernels: i32(2)}}))
	k := kernelOf(ns, "k1", "python3", "ann")
	create(t, k)
	pod := kernelPod(t, k)
	userUsage(t, ns, "ann", reserved("1/2", k.Name))
	ledger := &quota.Ledger{Client: k8sClient, Reader: k8sClient, APIReader: k8sClient, Namespace: ns}
	// The ledger read by the reconcile lacks the room (a cache behind the API server's
	// reservation); then the kernel is read live, and deleted and released right after.
	if err := ledger.Release(context.Background(), "ann", nbv1.ReservationKernel, k.Name); err != nil {
		t.Fatal(err)
	}
	read := k.DeepCopy()
	if err := get(read); err != nil {
		t.Fatal(err)
	}
	live := &readThen{Reader: k8sClient, then: func() {
		if err := k8sClient.Delete(context.Background(), k); err != nil {
			t.Error(err)
		}
		if err := ledger.Release(context.Background(), "ann", nbv1.ReservationKernel, k.Name); err != nil {
			t.Error(err)
		}
	}}
	r := &controllers.KernelReconciler{Client: k8sClient, APIReader: live, Quota: ledger}
	r.RecordRoomForTest(context.Background(), read, pod)
	if live.then != nil {
		t.Fatal("the reconcile did not read the kernel live")
	}
	u := &nbv1.UserUsage{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: nbv1.UsageName("ann")}}
	if err := get(u); err != nil {
		t.Fatal(err)
	}
	if err := reserved("0/2")(u); err != nil {
		t.Errorf("after a reconcile that recorded the room of a kernel deleted meanwhile: %v", err)
	}
}
