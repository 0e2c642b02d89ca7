package controllers

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
)

func TestPlanWarmPool(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	rfc := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }
	cold := func(name, owner string, created time.Duration) nbv1.Kernel {
		return nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(created)},
			Spec: nbv1.KernelParameters{Owner: nbv1.Owner(owner), KernelSpec: "py", Home: "users/" + owner}}
	}
	claimed := func(name, owner string, at time.Duration) nbv1.Kernel {
		k := cold(name, owner, 3*time.Hour)
		k.Annotations = map[string]string{nbv1.AnnotationClaimed: rfc(at)}
		return k
	}
	warm := func(name, owner string, lastStart time.Duration, generation string, conds ...metav1.Condition) nbv1.Kernel {
		k := cold(name, owner, time.Minute)
		k.Labels = map[string]string{nbv1.LabelWarm: "true"}
		k.Annotations = map[string]string{nbv1.AnnotationLastStart: rfc(lastStart), nbv1.AnnotationSpecGeneration: generation}
		k.Status.Conditions = conds
		return k
	}
	ready := metav1.Condition{Type: nbv1.ConditionReady, Status: metav1.ConditionTrue}
	failed := func(since time.Duration) metav1.Condition {
		return metav1.Condition{Type: nbv1.ConditionFailed, Status: metav1.ConditionTrue, LastTransitionTime: ago(since)}
	}
	spec := func(size int32) *nbv1.KernelSpec {
		ks := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Name: "py", Namespace: "ns", Generation: 3}}
		if size >= 0 {
			ks.Spec.WarmPool = &nbv1.WarmPool{Size: size, ActiveWithin: &metav1.Duration{Duration: time.Hour}}
		}
		return ks
	}
	type made struct{ Owner, Home, LastStart, Generation string }
	cases := []struct {
		name    string
		spec    *nbv1.KernelSpec
		invalid bool
		kernels []nbv1.Kernel
		create  []made
		remove  []string
		touch   map[string]string
		status  *nbv1.WarmPoolStatus
		next    time.Duration
	}{
		{name: "no pool, no warm kernels", spec: spec(-1), kernels: []nbv1.Kernel{cold("a", "alice", time.Minute)}},
		{name: "a user's start fills their pool in their home", spec: spec(2),
			kernels: []nbv1.Kernel{cold("a", "alice", 10*time.Minute), cold("b", "alice", 20*time.Minute)},
			create:  []made{{"alice", "users/alice", rfc(10 * time.Minute), "3"}, {"alice", "users/alice", rfc(10 * time.Minute), "3"}},
			status:  &nbv1.WarmPoolStatus{Starting: 2, Users: 1}, next: 50 * time.Minute},
		{name: "a full pool is left alone", spec: spec(1),
			kernels: []nbv1.Kernel{cold("a", "alice", 10*time.Minute), warm("w", "alice", 10*time.Minute, "3", ready)},
			status:  &nbv1.WarmPoolStatus{Ready: 1, Users: 1}, next: 50 * time.Minute},
		{name: "a pool outlives the kernels it served until its window ends", spec: spec(1),
			kernels: []nbv1.Kernel{warm("w", "alice", 50*time.Minute, "3", ready)},
			status:  &nbv1.WarmPoolStatus{Ready: 1, Users: 1}, next: 10 * time.Minute},
		{name: "an inactive user's pool is emptied", spec: spec(1),
			kernels: []nbv1.Kernel{cold("a", "alice", 2*time.Hour), warm("w", "alice", 2*time.Hour, "3", ready)},
			remove:  []string{"w"}, status: &nbv1.WarmPoolStatus{}},
		{name: "a claim keeps the pool, and the warm kernels learn of it", spec: spec(1),
			kernels: []nbv1.Kernel{claimed("c", "alice", 5*time.Minute), warm("w", "alice", 50*time.Minute, "3", ready)},
			touch:   map[string]string{"w": rfc(5 * time.Minute)},
			status:  &nbv1.WarmPoolStatus{Ready: 1, Users: 1}, next: 55 * time.Minute},
		{name: "kernels of an older spec are replaced", spec: spec(1),
			kernels: []nbv1.Kernel{cold("a", "alice", time.Minute), warm("w", "alice", time.Minute, "2", ready)},
			remove:  []string{"w"}, create: []made{{"alice", "users/alice", rfc(time.Minute), "3"}},
			status: &nbv1.WarmPoolStatus{Starting: 1, Users: 1}, next: 59 * time.Minute},
		{name: "a failed kernel holds its place for a while", spec: spec(1),
			kernels: []nbv1.Kernel{cold("a", "alice", time.Minute), warm("w", "alice", time.Minute, "3", failed(20*time.Second))},
			status:  &nbv1.WarmPoolStatus{Starting: 1, Users: 1}, next: 40 * time.Second},
		{name: "then it is replaced", spec: spec(1),
			kernels: []nbv1.Kernel{cold("a", "alice", time.Minute), warm("w", "alice", time.Minute, "3", failed(2*time.Minute))},
			remove:  []string{"w"}, create: []made{{"alice", "users/alice", rfc(time.Minute), "3"}},
			status: &nbv1.WarmPoolStatus{Starting: 1, Users: 1}, next: 59 * time.Minute},
		{name: "a smaller pool keeps the ready kernels", spec: spec(1),
			kernels: []nbv1.Kernel{cold("a", "alice", time.Minute), warm("x", "alice", time.Minute, "3"), warm("y", "alice", time.Minute, "3", ready)},
			remove:  []string{"x"}, status: &nbv1.WarmPoolStatus{Ready: 1, Users: 1}, next: 59 * time.Minute},
		{name: "pools are per user", spec: spec(1),
			kernels: []nbv1.Kernel{cold("a", "alice", time.Minute), cold("b", "bob", 2*time.Hour), warm("w", "bob", 2*time.Hour, "3", ready)},
			remove:  []string{"w"}, create: []made{{"alice", "users/alice", rfc(time.Minute), "3"}},
			status: &nbv1.WarmPoolStatus{Starting: 1, Users: 1}, next: 59 * time.Minute},
		{name: "an admin's kernels over the whole volume keep a pool over it", spec: spec(1),
			kernels: []nbv1.Kernel{func() nbv1.Kernel { k := cold("a", "admin", time.Minute); k.Spec.Home = nbv1.HomeWholeVolume; return k }()},
			create:  []made{{"admin", nbv1.HomeWholeVolume, rfc(time.Minute), "3"}},
			status:  &nbv1.WarmPoolStatus{Starting: 1, Users: 1}, next: 59 * time.Minute},
		{name: "a pool per home: a warm kernel is only ever a copy of a start", spec: spec(1),
			kernels: []nbv1.Kernel{cold("a", "alice", time.Minute), func() nbv1.Kernel { k := cold("b", "alice", 2*time.Minute); k.Spec.Home = "shared"; return k }()},
			create:  []made{{"alice", "shared", rfc(2 * time.Minute), "3"}, {"alice", "users/alice", rfc(time.Minute), "3"}},
			status:  &nbv1.WarmPoolStatus{Starting: 2, Users: 1}, next: 58 * time.Minute},
		{name: "an invalid spec keeps no pool", spec: spec(1), invalid: true,
			kernels: []nbv1.Kernel{cold("a", "alice", time.Minute), warm("w", "alice", time.Minute, "3", ready)},
			remove:  []string{"w"}, status: &nbv1.WarmPoolStatus{}},
		{name: "a spec whose pool was dropped empties it", spec: spec(-1),
			kernels: []nbv1.Kernel{cold("a", "alice", time.Minute), warm("w", "alice", time.Minute, "3", ready)},
			remove:  []string{"w"}, status: &nbv1.WarmPoolStatus{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := planWarmPool(tc.spec, !tc.invalid, slices.Clone(tc.kernels), now)
			var created []made
			for _, k := range plan.create {
				if !k.Warm() || k.Spec.KernelSpec != "py" || k.Namespace != "ns" || k.Spec.Path != "" || k.Spec.Env != nil || k.Spec.Parameters != nil {
					t.Errorf("created kernel %+v is not a plain warm kernel of the spec", k)
				}
				created = append(created, made{string(k.Spec.Owner), k.Spec.Home, k.Annotations[nbv1.AnnotationLastStart], k.Annotations[nbv1.AnnotationSpecGeneration]})
			}
			if diff := cmp.Diff(tc.create, created); diff != "" {
				t.Errorf("created (-want +got):\n%s", diff)
			}
			var removed []string
			for _, k := range plan.remove {
				removed = append(removed, k.Name)
			}
			if diff := cmp.Diff(tc.remove, removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			touched := map[string]string{}
			for k, v := range plan.touch {
				touched[k.Name] = v
			}
			if tc.touch == nil {
				tc.touch = map[string]string{}
			}
			if diff := cmp.Diff(tc.touch, touched); diff != "" {
				t.Errorf("touched (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.status, plan.status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if plan.next != tc.next {
				t.Errorf("next look in %s, want %s", plan.next, tc.next)
			}
		})
	}
	if a, b := warmKernel(spec(1), poolKey{owner: "alice"}, "", "3"), warmKernel(spec(1), poolKey{owner: "alice"}, "", "3"); a.Name == b.Name {
		t.Errorf("two warm kernels share the name %s", a.Name)
	}
}
