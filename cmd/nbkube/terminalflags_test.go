package main

import (
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// Terminals are on unless --terminals=false, with which /api/terminals answers 404 as Jupyter
// Server's without terminals; --terminal-kernel-spec is the spec a start that names none runs
// in.
func TestTerminalFlags_OnByDefaultAndTheirKernelSpec(t *testing.T) {
	c, cfg := testenv.KubeClientConfig(t)
	ns := testenv.Namespace(t, c)
	for _, name := range []string{"python3", "small"} {
		if err := c.Create(t.Context(), &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: nbv1.KernelSpecSpec{DisplayName: name, Language: "python", Argv: []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}}}); err != nil {
			t.Fatal(err)
		}
	}
	admin, token := identity.User{Name: "admin", Admin: true}, longToken("admin")
	on := startAPI(t, cfg, c, ns, admin, "--token="+token, "--terminal-kernel-spec=small")
	status, m := on("POST", "api/terminals", token)
	if status != http.StatusOK {
		t.Fatalf("POST /api/terminals: %d %v", status, m)
	}
	term := &nbv1.Terminal{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: m["name"].(string)}, term); err != nil || term.Spec.KernelSpec != "small" {
		t.Errorf("the terminal %+v (%v), want one of small", term.Spec, err)
	}

	off := startAPI(t, cfg, c, ns, admin, "--token="+token, "--terminals=false")
	if status, m := off("GET", "api/terminals", token); status != http.StatusNotFound {
		t.Errorf("--terminals=false: GET /api/terminals %d %v", status, m)
	}
}
