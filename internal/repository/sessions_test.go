package repository

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/identity"
)

// Jupyter's SessionManager starts a kernel of the name a new session gives (the API server
// fills in the default when it gives none) when its kernel id names no kernel; its PATCH
// answers 400 to such an id. Kernel names are Jupyter's, "python" included.
func TestCreateSession_WithAKernelIDThatNamesNoKernelStartsOneOfTheName(t *testing.T) {
	c, ns, k := startEnv(t)
	r := &Sessions{Reader: c, Writer: c, Namespace: ns, Kernels: k}
	u := identity.User{Name: "alice"}
	str := func(s string) *string { return &s }
	const unknown = "00000000-0000-4000-8000-000000000000"

	m, created, err := r.CreateSession(t.Context(), u, SessionChange{Path: str("a.ipynb"), KernelID: str(unknown), KernelSpec: str("sample 2")})
	if err != nil || !created {
		t.Fatalf("create with an unknown kernel id: %v, %v", created, err)
	}
	if m.Kernel == nil || m.Kernel.ID == unknown || m.Kernel.Name != "sample 2" {
		t.Errorf("create with an unknown kernel id: kernel %+v, want a new sample 2", m.Kernel)
	}
	if got, err := r.GetSession(t.Context(), u, m.ID); err != nil || got.Kernel == nil || got.Kernel.Name != "sample 2" {
		t.Errorf("get: %+v, %v", got, err)
	}

	// A kernel that exists is used, whatever the name says.
	shared, _, err := r.CreateSession(t.Context(), u, SessionChange{Path: str("b.ipynb"), KernelID: &m.Kernel.ID, KernelSpec: str("python3")})
	if err != nil || shared.Kernel == nil || shared.Kernel.ID != m.Kernel.ID {
		t.Errorf("create with a kernel id: %+v, %v; want kernel %s", shared.Kernel, err, m.Kernel.ID)
	}

	py, _, err := r.CreateSession(t.Context(), u, SessionChange{Path: str("c.ipynb"), KernelSpec: str("python")})
	if err != nil || py.Kernel == nil || py.Kernel.Name != "python3" {
		t.Errorf("create with kernel name python: %+v, %v; want python3", py.Kernel, err)
	}

	_, err = r.UpdateSession(t.Context(), u, py.ID, SessionChange{KernelID: str(unknown)})
	if !errors.Is(err, domainerr.ErrInvalid) || err.Error() != "No such kernel: "+unknown {
		t.Errorf("PATCH to an unknown kernel id: %v, want Jupyter's 400", err)
	}
	if _, _, err := r.CreateSession(t.Context(), u, SessionChange{Path: str("d.ipynb"), KernelID: str(unknown)}); !errors.Is(err, domainerr.ErrNotFound) {
		t.Errorf("create with an unknown kernel id and no name: %v, want not found", err)
	}
}

// A session path that leaves the contents root (".." or a second leading slash) is refused at
// once as invalid, by POST and PATCH alike; the Kernel it would need could never be created,
// and the request would wait out the start timeout.
func TestSessions_PathsOutsideTheRootAreInvalidAtOnce(t *testing.T) {
	c, ns, k := startEnv(t)
	k.StartTimeout = time.Hour // a request that waits for such a kernel would hang the test
	r := &Sessions{Reader: c, Writer: c, Namespace: ns, Kernels: k}
	u := identity.User{Name: "alice"}
	str := func(s string) *string { return &s }
	for _, p := range []string{"../x.ipynb", "//x.ipynb", "a/../../x.ipynb", "/../x.ipynb", "a/..", ".."} {
		if _, _, err := r.CreateSession(t.Context(), u, SessionChange{Path: str(p), KernelSpec: str("python3")}); !errors.Is(err, domainerr.ErrInvalid) {
			t.Errorf("POST with path %q: %v, want invalid", p, err)
		}
	}
	m, _, err := r.CreateSession(t.Context(), u, SessionChange{Path: str("/nb/ok.ipynb"), KernelSpec: str("python3")})
	if err != nil || m.Path != "nb/ok.ipynb" {
		t.Fatalf("POST with a good path: %+v, %v", m, err)
	}
	if _, err := r.UpdateSession(t.Context(), u, m.ID, SessionChange{Path: str("../y.ipynb")}); !errors.Is(err, domainerr.ErrInvalid) {
		t.Errorf("PATCH to ../y.ipynb: %v, want invalid", err)
	}
	if got, err := r.GetSession(t.Context(), u, m.ID); err != nil || got.Path != "nb/ok.ipynb" {
		t.Errorf("after the refused PATCH: %+v, %v", got, err)
	}
	// The resource's own validation refuses them too, for sessions made with kubectl.
	for _, p := range []string{"../x.ipynb", "/x.ipynb", "a/../../x.ipynb"} {
		s := &nbv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "s-"},
			Spec: nbv1.SessionParameters{Owner: "alice", Path: p, Kernel: nbv1.SessionKernel{KernelSpec: "python3"}}}
		if err := c.Create(t.Context(), s); !apierrors.IsInvalid(err) {
			t.Errorf("a Session with path %q: %v, want invalid", p, err)
		}
	}
}

// A session's kernel takes the launch parameters the request gives, checked against its
// spec before anything is made.
func TestCreateSession_KernelParameters(t *testing.T) {
	c, ns, k := startEnv(t)
	spec := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "levels"},
		Spec: nbv1.KernelSpecSpec{DisplayName: "Levels", Language: "python",
			Argv:       []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}", "--log-level={level}"},
			Parameters: []nbv1.KernelParameter{{Name: "level", Type: nbv1.ParameterString, Default: "INFO", Enum: []string{"DEBUG", "INFO"}}}}}
	if err := c.Create(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	r := &Sessions{Reader: c, Writer: c, Namespace: ns, Kernels: k}
	u := identity.User{Name: "alice"}
	str := func(s string) *string { return &s }

	if _, _, err := r.CreateSession(t.Context(), u, SessionChange{Path: str("bad.ipynb"), KernelSpec: str("levels"),
		Parameters: map[string]any{"level": "TRACE"}}); !errors.Is(err, domainerr.ErrInvalid) {
		t.Errorf("a level the spec does not allow: %v, want ErrInvalid", err)
	}
	var list nbv1.SessionList
	if err := c.List(t.Context(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("sessions after the refusal: %d (%v)", len(list.Items), err)
	}

	m, _, err := r.CreateSession(t.Context(), u, SessionChange{Path: str("a.ipynb"), KernelSpec: str("levels"),
		Parameters: map[string]any{"level": "DEBUG"}})
	if err != nil {
		t.Fatal(err)
	}
	s := &nbv1.Session{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: m.ID}, s); err != nil {
		t.Fatal(err)
	}
	if got := s.Spec.Kernel.Parameters; len(got) != 1 || got["level"] != "DEBUG" {
		t.Errorf("the session's kernel parameters %v", got)
	}
}
