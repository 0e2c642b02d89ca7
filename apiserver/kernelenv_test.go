package apiserver_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/testenv"
)

// gatewayEnv is a namespace of a real kube-apiserver with a python3 KernelSpec, whose
// kernels playKernels calls Ready, and an API server over it with a users file of ann and
// ben, ordinary users, and gw, a gateway with the right to act for others.
func gatewayEnv(t *testing.T) (client.Client, string, *testServer, map[string]string) {
	t.Helper()
	c := testenv.KubeClient(t)
	ns := testenv.Namespace(t, c)
	if err := c.Create(t.Context(), &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "python3"},
		Spec: nbv1.KernelSpecSpec{DisplayName: "Python 3", Language: "python", Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}}}); err != nil {
		t.Fatal(err)
	}
	playKernels(t, c, ns)
	tokens := map[string]string{}
	var b strings.Builder
	b.WriteString("users:\n")
	for _, u := range []struct {
		name  string
		actAs bool
	}{{"ann", false}, {"ben", false}, {"gw", true}} {
		tokens[u.name] = userToken(t, u.name)
		h, err := identity.HashSecret(tokens[u.name])
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "- name: %s\n  act_as: %v\n  token_hash: %q\n", u.name, u.actAs, h)
	}
	path := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := identity.NewUsersFile(path, identity.UsersFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, func(o *apiserver.Options) {
		specs := &repository.KernelSpecs{Reader: c, Namespace: ns}
		o.Kernels = &repository.Kernels{Reader: c, Writer: c, Namespace: ns, Specs: specs, StartTimeout: 30 * time.Second}
		o.KernelSpecs = specs
		o.Providers = []identity.Provider{users}
	})
	return c, ns, s, tokens
}

// playKernels plays the Kernel controller for the kernels of ns until the test ends, as far
// as the API server sees them: it calls every kernel Ready. No pod or kernel process runs;
// what these tests claim is who a kernel belongs to and what its resource asks for.
func playKernels(t *testing.T, c client.Client, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var kernels nbv1.KernelList
			if err := c.List(ctx, &kernels, client.InNamespace(ns)); err == nil {
				for i := range kernels.Items {
					kn := &kernels.Items[i]
					if meta.SetStatusCondition(&kn.Status.Conditions, metav1.Condition{Type: nbv1.ConditionReady,
						Status: metav1.ConditionTrue, Reason: "Played", Message: "the test plays the kernel controller"}) {
						_ = c.Status().Update(ctx, kn)
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
}

func kernelIDs(t *testing.T, r response) []string {
	t.Helper()
	expect(t, r, http.StatusOK)
	var list []struct{ ID string }
	if err := jsonUnmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range list {
		ids = append(ids, k.ID)
	}
	return ids
}

// Jupyter Server in gateway mode names the kernel's user in KERNEL_USERNAME: a gateway with
// the right to act for others starts ann's kernel, which ann sees and ben does not, and which
// the gateway keeps using; anyone else naming another user is refused.
func TestStartKernel_GatewayActsForTheUserItNames(t *testing.T) {
	c, ns, s, tokens := gatewayEnv(t)
	as := func(user string) []string { return []string{"Authorization", "token " + tokens[user]} }

	r := s.do("POST", "/api/kernels", map[string]any{"name": "python3", "env": map[string]string{
		"KERNEL_USERNAME": "ann", "KERNEL_LAUNCH_TIMEOUT": "40"}}, as("gw")...)
	expect(t, r, http.StatusCreated)
	id, _ := r.json(t)["id"].(string)
	if owner := r.json(t)["owner"]; owner != "ann" {
		t.Errorf("the kernel the gateway started for ann belongs to %v", owner)
	}
	kn := &nbv1.Kernel{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: id}, kn); err != nil {
		t.Fatal(err)
	}
	if kn.Spec.Owner != "ann" {
		t.Errorf("spec.owner %q, want ann", kn.Spec.Owner)
	}
	if ids := kernelIDs(t, s.do("GET", "/api/kernels", nil, as("ann")...)); !slices.Equal(ids, []string{id}) {
		t.Errorf("ann lists %v, want her kernel %s", ids, id)
	}
	expect(t, s.do("GET", "/api/kernels/"+id, nil, as("ann")...), http.StatusOK)
	if ids := kernelIDs(t, s.do("GET", "/api/kernels", nil, as("ben")...)); len(ids) != 0 {
		t.Errorf("ben lists %v", ids)
	}
	expect(t, s.do("GET", "/api/kernels/"+id, nil, as("ben")...), http.StatusNotFound)
	// The gateway goes on using the kernel it started: Jupyter Server asks for its model and
	// lists kernels without naming the user again.
	expect(t, s.do("GET", "/api/kernels/"+id, nil, as("gw")...), http.StatusOK)
	if ids := kernelIDs(t, s.do("GET", "/api/kernels", nil, as("gw")...)); !slices.Equal(ids, []string{id}) {
		t.Errorf("the gateway lists %v, want the kernel it started %s", ids, id)
	}

	// An ordinary user may name only themselves.
	expect(t, s.do("POST", "/api/kernels", map[string]any{"name": "python3", "env": map[string]string{"KERNEL_USERNAME": "ann"}}, as("ben")...), http.StatusForbidden)
	r = s.do("POST", "/api/kernels", map[string]any{"name": "python3", "env": map[string]string{"KERNEL_USERNAME": "ben"}}, as("ben")...)
	expect(t, r, http.StatusCreated)
	if owner := r.json(t)["owner"]; owner != "ben" {
		t.Errorf("ben's own kernel belongs to %v", owner)
	}
	// ben's kernel is none of the gateway's business.
	benID, _ := r.json(t)["id"].(string)
	expect(t, s.do("GET", "/api/kernels/"+benID, nil, as("gw")...), http.StatusNotFound)
	// A name no owner can have is refused.
	expect(t, s.do("POST", "/api/kernels", map[string]any{"name": "python3", "env": map[string]string{"KERNEL_USERNAME": "a b"}}, as("gw")...), http.StatusBadRequest)
}

// KERNEL_WORKING_DIR is the kernel's working directory, validated as path is; of the rest of
// env, only the allow-list reaches the kernel; values must be strings.
func TestStartKernel_GatewayEnvSetsWorkingDirAndAllowListedVariables(t *testing.T) {
	c, ns, s, tokens := gatewayEnv(t)
	as := []string{"Authorization", "token " + tokens["gw"]}
	start := func(env map[string]any) response {
		return s.do("POST", "/api/kernels", map[string]any{"name": "python3", "env": env}, as...)
	}
	kernel := func(r response) *nbv1.Kernel { return startedKernel(t, c, ns, r) }

	kn := kernel(start(map[string]any{"KERNEL_USERNAME": "ann", "KERNEL_WORKING_DIR": "work/a",
		"KERNEL_LAUNCH_TIMEOUT": "40", "KERNEL_IMAGE": "evil:latest", "KERNEL_NAMESPACE": "kube-system", "PATH": "/evil", "NBKUBE_KERNEL_ID": "x"}))
	if kn.Spec.Path != "work/a" {
		t.Errorf("KERNEL_WORKING_DIR work/a: spec.path %q", kn.Spec.Path)
	}
	if want := map[string]string{"KERNEL_USERNAME": "ann"}; !maps.Equal(kn.Spec.Env, want) {
		t.Errorf("spec.env %v, want %v", kn.Spec.Env, want)
	}
	// Jupyter Server sends the absolute path on its own disk: under where kernel pods mount
	// the contents, it is the path below; elsewhere nbkube cannot know it.
	if kn := kernel(start(map[string]any{"KERNEL_WORKING_DIR": "/home/jovyan/work/b/c"})); kn.Spec.Path != "b/c" {
		t.Errorf("KERNEL_WORKING_DIR /home/jovyan/work/b/c: spec.path %q, want b/c", kn.Spec.Path)
	}
	if kn := kernel(start(map[string]any{"KERNEL_WORKING_DIR": "/srv/jupyter/b"})); kn.Spec.Path != "" {
		t.Errorf("KERNEL_WORKING_DIR /srv/jupyter/b: spec.path %q, want the root", kn.Spec.Path)
	}
	for _, dir := range []string{"../up", "a/../../up", "/home/jovyan/work/../../etc"} {
		expect(t, start(map[string]any{"KERNEL_WORKING_DIR": dir}), http.StatusBadRequest)
	}
	expect(t, start(map[string]any{"KERNEL_USERNAME": 7}), http.StatusBadRequest)
	expect(t, start(map[string]any{"KERNEL_USERNAME": nil}), http.StatusBadRequest)
	expect(t, start(map[string]any{"KERNEL_X": strings.Repeat("x", 64<<10)}), http.StatusBadRequest)
}

// startedKernel is the Kernel a start answered 201 with.
func startedKernel(t *testing.T, c client.Client, ns string, r response) *nbv1.Kernel {
	t.Helper()
	expect(t, r, http.StatusCreated)
	id, _ := r.json(t)["id"].(string)
	kn := &nbv1.Kernel{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: id}, kn); err != nil {
		t.Fatal(err)
	}
	return kn
}
