package quota_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/quota"
	"github.com/nbkube/nbkube/internal/scheme"
	"github.com/nbkube/nbkube/internal/testenv"
)

func i32(n int32) *int32 { return &n }

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

func kernel(name string) nbv1.Reservation {
	return nbv1.Reservation{Kind: nbv1.ReservationKernel, Name: name, KernelSpec: "python3", CPU: q("500m")}
}

func createPolicy(t *testing.T, c client.Client, ns, name string, spec nbv1.UserPolicySpec) {
	t.Helper()
	if err := c.Create(t.Context(), &nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}); err != nil {
		t.Fatal(err)
	}
}

func usage(t *testing.T, c client.Client, ns, user string) *nbv1.UserUsage {
	t.Helper()
	u := &nbv1.UserUsage{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: nbv1.UsageName(nbv1.Owner(user))}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestLedger_ConcurrentStartsThroughTwoWritersNeverExceed is the atomicity claim at the
// ledger: twenty reservations at once, through two clients of their own (as two API server
// replicas have), admit exactly the limit.
func TestLedger_ConcurrentStartsThroughTwoWritersNeverExceed(t *testing.T) {
	c, cfg := testenv.KubeClientConfig(t)
	ns := testenv.Namespace(t, c)
	createPolicy(t, c, ns, "ann", nbv1.UserPolicySpec{Users: []string{"ann"}, Limits: nbv1.UserLimits{Kernels: i32(5), CPU: q("10")}})
	var ledgers [2]*quota.Ledger
	for i := range ledgers {
		ci, err := client.New(cfg, client.Options{Scheme: scheme.New()})
		if err != nil {
			t.Fatal(err)
		}
		ledgers[i] = &quota.Ledger{Client: ci, Reader: ci, APIReader: ci, Namespace: ns}
	}
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() {
			_, on, err := ledgers[i%2].Reserve(t.Context(), quota.Request{Owner: "ann", Groups: []string{"staff"}, Reservation: kernel(fmt.Sprintf("k%02d", i))})
			if !on {
				err = errors.New("quotas off")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	admitted := 0
	for i, err := range errs {
		var ex *quota.Exceeded
		switch {
		case err == nil:
			admitted++
		case errors.As(err, &ex) && ex.Reason() == "kernels: 5 of 5":
		default:
			t.Errorf("start %d: %v", i, err)
		}
	}
	u := usage(t, c, ns, "ann")
	if admitted != 5 || len(u.Spec.Reservations) != 5 {
		t.Fatalf("admitted %d, ledger holds %d; want 5 and 5", admitted, len(u.Spec.Reservations))
	}
	if u.Status.Kernels != "5/5" || u.Status.CPU != "2500m/10" || u.Status.Policies != "ann" || strings.Join(u.Spec.Groups, ",") != "staff" {
		t.Errorf("summary %+v groups %v", u.Status, u.Spec.Groups)
	}

	// Released room is room again; a reservation made twice is held once.
	gone := u.Spec.Reservations[0].Name
	if err := ledgers[0].Release(t.Context(), "ann", nbv1.ReservationKernel, gone); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, err := ledgers[1].Reserve(t.Context(), quota.Request{Owner: "ann", Reservation: kernel("again")}); err != nil {
			t.Fatalf("after a release: %v", err)
		}
	}
	// What already runs is recorded even over the limit (a kernel made before the policy).
	if _, _, err := ledgers[0].Reserve(t.Context(), quota.Request{Owner: "ann", Reservation: kernel("old"), Record: true}); err != nil {
		t.Fatal(err)
	}
	if u := usage(t, c, ns, "ann"); len(u.Spec.Reservations) != 6 || u.Status.Kernels != "6/5" {
		t.Errorf("after release, reserve twice and record: %d reservations, %s", len(u.Spec.Reservations), u.Status.Kernels)
	}
}

// staleReader answers for UserUsages with the copy it was given, as a cache that has not yet
// seen the latest write does.
type staleReader struct {
	client.Reader
	usage *nbv1.UserUsage
}

func (r staleReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if u, ok := obj.(*nbv1.UserUsage); ok && key.Name == r.usage.Name {
		r.usage.DeepCopyInto(u)
		return nil
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// TestLedger_RefusesOnlyOnTheLedgerAsItIsNow: a start right after a release is admitted even
// where the cache still shows the released room (a slow machine's cache, seen in CI as a
// session's kernel change refused "kernels: 2 of 2").
func TestLedger_RefusesOnlyOnTheLedgerAsItIsNow(t *testing.T) {
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	createPolicy(t, c, ns, "cat", nbv1.UserPolicySpec{Users: []string{"cat"}, Limits: nbv1.UserLimits{Kernels: i32(2)}})
	l := &quota.Ledger{Client: c, Reader: c, APIReader: c, Namespace: ns}
	for _, k := range []string{"a", "b"} {
		if _, _, err := l.Reserve(t.Context(), quota.Request{Owner: "cat", Reservation: kernel(k)}); err != nil {
			t.Fatal(err)
		}
	}
	stale := usage(t, c, ns, "cat")
	if err := l.Release(t.Context(), "cat", nbv1.ReservationKernel, "a"); err != nil {
		t.Fatal(err)
	}
	cached := &quota.Ledger{Client: c, Reader: staleReader{Reader: c, usage: stale}, APIReader: c, Namespace: ns}
	if _, _, err := cached.Reserve(t.Context(), quota.Request{Owner: "cat", Reservation: kernel("c")}); err != nil {
		t.Fatalf("a start after a release, through a cache that has not seen it: %v", err)
	}
	var ex *quota.Exceeded
	if _, _, err := cached.Reserve(t.Context(), quota.Request{Owner: "cat", Reservation: kernel("d")}); !errors.As(err, &ex) || ex.Reason() != "kernels: 2 of 2" {
		t.Fatalf("a third kernel: %v, want kernels: 2 of 2", err)
	}
}

func TestLedger_ClustersSpecsAndOff(t *testing.T) {
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	l := &quota.Ledger{Client: c, Reader: c, APIReader: c, Namespace: ns}

	// No policy: quotas are off and nothing is written.
	if _, on, err := l.Reserve(t.Context(), quota.Request{Owner: "ben", Reservation: kernel("k")}); err != nil || on {
		t.Fatalf("without policies: on %v, %v", on, err)
	}
	var list nbv1.UserUsageList
	if err := c.List(t.Context(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Fatalf("ledgers written with quotas off: %d, %v", len(list.Items), err)
	}

	createPolicy(t, c, ns, "students", nbv1.UserPolicySpec{Groups: []string{"students"}, KernelSpecs: []string{"python3"},
		Limits: nbv1.UserLimits{Engines: i32(6), Memory: q("8Gi")}})
	cluster := func(n int32) quota.Request {
		return quota.Request{Owner: "ben", Groups: []string{"students"}, Reservation: nbv1.Reservation{
			Kind: nbv1.ReservationCluster, Name: "c1", Engines: n, Memory: q(fmt.Sprintf("%dGi", n))}}
	}
	if _, _, err := l.Reserve(t.Context(), cluster(4)); err != nil {
		t.Fatal(err)
	}
	var ex *quota.Exceeded
	if _, _, err := l.Reserve(t.Context(), cluster(7)); !errors.As(err, &ex) || ex.Reason() != "engines: 4 of 6" {
		t.Fatalf("growing past the limit: %v", err)
	}
	if _, _, err := l.Reserve(t.Context(), cluster(2)); err != nil {
		t.Fatalf("shrinking: %v", err)
	}
	if u := usage(t, c, ns, "ben"); len(u.Spec.Reservations) != 1 || u.Status.Engines != "2/6" || u.Status.Memory != "2Gi/8Gi" {
		t.Errorf("one cluster of 2 engines: %+v", u.Status)
	}
	// Groups recorded at a start govern a start that does not know them (kubectl's).
	r := kernel("r-kernel")
	r.KernelSpec = "ir"
	var na *quota.SpecNotAllowed
	if _, _, err := l.Reserve(t.Context(), quota.Request{Owner: "ben", Reservation: r}); !errors.As(err, &na) {
		t.Fatalf("a spec the policy does not allow: %v", err)
	}
	if _, _, err := l.Reserve(t.Context(), quota.Request{Owner: "ben", Reservation: kernel("py")}); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context(), "ben", nbv1.ReservationCluster, "c1"); err != nil {
		t.Fatal(err)
	}
	if u := usage(t, c, ns, "ben"); len(u.Spec.Reservations) != 1 || u.Status.Engines != "0/6" || u.Status.Kernels != "1" {
		t.Errorf("after releasing the cluster: %+v", u.Status)
	}
	// A name that is no object name gets a digest.
	createPolicy(t, c, ns, "all", nbv1.UserPolicySpec{AllUsers: true})
	if _, _, err := l.Reserve(t.Context(), quota.Request{Owner: "Cat@Example.org", Reservation: kernel("k")}); err != nil {
		t.Fatal(err)
	}
	if u := usage(t, c, ns, "Cat@Example.org"); !strings.HasPrefix(u.Name, "u-") || u.Spec.User != "Cat@Example.org" {
		t.Errorf("ledger %s of %s", u.Name, u.Spec.User)
	}
}

// A terminal takes room as a kernel does, its spec's resources with the owner's defaults,
// but counts against the terminals limit alone, and only in the kernel specs allowed.
func TestLedger_TerminalsHaveTheirOwnLimitAndTheKernelsSpecs(t *testing.T) {
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	l := &quota.Ledger{Client: c, Reader: c, APIReader: c, Namespace: ns}
	createPolicy(t, c, ns, "ann", nbv1.UserPolicySpec{Users: []string{"ann"}, KernelSpecs: []string{"python3"},
		Limits:           nbv1.UserLimits{Kernels: i32(1), Terminals: i32(1), CPU: q("2")},
		DefaultResources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}})
	spec := func(name string) *nbv1.KernelSpec {
		return &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	if _, err := l.ReserveKernel(t.Context(), "ann", []string{}, "k1", spec("python3")); err != nil {
		t.Fatal(err)
	}
	res, err := l.ReserveTerminal(t.Context(), "ann", []string{}, "t1", spec("python3"))
	if err != nil {
		t.Fatalf("a terminal beside a kernel at its limit: %v", err)
	}
	if cpu := res.Requests[corev1.ResourceCPU]; cpu.String() != "500m" {
		t.Errorf("the terminal's resources %+v lack the policy's default", res)
	}
	var ex *quota.Exceeded
	if _, err := l.ReserveTerminal(t.Context(), "ann", []string{}, "t2", spec("python3")); !errors.As(err, &ex) || ex.Reason() != "terminals: 1 of 1" {
		t.Errorf("a second terminal: %v", err)
	}
	var na *quota.SpecNotAllowed
	if _, err := l.ReserveTerminal(t.Context(), "ann", []string{}, "t3", spec("ir")); !errors.As(err, &na) {
		t.Errorf("a terminal of a spec the policy does not allow: %v", err)
	}
	if u := usage(t, c, ns, "ann"); u.Status.Terminals != "1/1" || u.Status.Kernels != "1/1" || u.Status.CPU != "1/2" {
		t.Errorf("a kernel and a terminal: %+v", u.Status)
	}
}

// TestUserPolicy_Validation: the CRD's schema and CEL rules refuse a policy that selects no
// one and negative limits.
func TestUserPolicy_Validation(t *testing.T) {
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	bad := map[string]nbv1.UserPolicySpec{
		"selects no one": {Limits: nbv1.UserLimits{Kernels: i32(1)}},
		"empty lists":    {Users: []string{}, Groups: []string{}},
		"negative cpu":   {AllUsers: true, Limits: nbv1.UserLimits{CPU: q("-1")}},
		"negative count": {AllUsers: true, Limits: nbv1.UserLimits{Kernels: i32(-1)}},
		"bad spec name":  {AllUsers: true, KernelSpecs: []string{"Not A Name"}},
	}
	for what, spec := range bad {
		err := c.Create(t.Context(), &nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-", Namespace: ns}, Spec: spec})
		if err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
	createPolicy(t, c, ns, "ok", nbv1.UserPolicySpec{Groups: []string{"g"}, Limits: nbv1.UserLimits{CPU: q("0"), GPU: q("1")}})
}
