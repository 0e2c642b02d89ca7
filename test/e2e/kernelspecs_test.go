package e2e

import (
	"bytes"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/testenv"
)

// unknownKernelID is a kernel id that no server has.
const unknownKernelID = "00000000-0000-4000-8000-000000000000"

// TestKernelSpecs_ThroughLocal serves one kernel spec directory with `nbkube local` and with
// Debian's Jupyter Server, and asks both the same questions about kernel names and kernel spec
// files: a spec whose name cannot be a resource name ("sample 2"), with files beside its
// kernel.json; the name "python", which Jupyter starts as python3; sessions that name a kernel
// id the server does not have. Every expectation holds for both servers, so that each is
// Jupyter's answer and not a guess at it.
func TestKernelSpecs_ThroughLocal(t *testing.T) {
	data := t.TempDir()
	spec := filepath.Join(data, "kernels", "sample 2")
	logo, err := os.ReadFile("/usr/share/jupyter/kernels/python3/logo-64x64.png")
	if err != nil {
		t.Fatalf("Debian's python3-ipykernel kernel spec: %v", err)
	}
	files := map[string][]byte{
		"kernel.json":    []byte(`{"argv":["/usr/bin/python3","-m","ipykernel_launcher","-f","{connection_file}"],"display_name":"Sample 2","language":"python"}`),
		"kernel.js":      []byte("define(function () { return { onload: function () {} }; });\n"),
		"logo-64x64.png": logo,
		"README.txt":     []byte("files beside kernel.json are served too\n"),
	}
	if err := os.MkdirAll(spec, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(spec, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Both servers read the kernel specs of this data directory and of the system's (Debian's
	// python3), nothing of the machine's user.
	t.Setenv("JUPYTER_PATH", "")
	t.Setenv("JUPYTER_DATA_DIR", data)

	inst := startLocal(t, t.TempDir(), t.TempDir())
	servers := []struct {
		name string
		api  *jupyterAPI
	}{{"nbkube", inst.api(t)}, {"JupyterServer", startJupyterServer(t, data)}}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Run("SpecNamedWithASpace", func(t *testing.T) { testSpecNamedWithASpace(t, srv.api, files) })
			t.Run("PythonIsPython3", func(t *testing.T) { testPythonIsPython3(t, srv.api) })
			t.Run("SessionWithAnUnknownKernelID", func(t *testing.T) { testSessionWithAnUnknownKernelID(t, srv.api) })
		})
	}
}

// kernelSpecsModel is the part of GET /api/kernelspecs the test reads.
type kernelSpecsModel struct {
	Default     string `json:"default"`
	KernelSpecs map[string]struct {
		Name      string            `json:"name"`
		Resources map[string]string `json:"resources"`
	} `json:"kernelspecs"`
}

// kernelModel is the part of Jupyter's kernel model the test reads.
type kernelModel struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

func testSpecNamedWithASpace(t *testing.T, api *jupyterAPI, files map[string][]byte) {
	var specs kernelSpecsModel
	api.getJSON(t, "api/kernelspecs", &specs)
	sample, ok := specs.KernelSpecs["sample 2"]
	if !ok {
		t.Fatalf("GET /api/kernelspecs lists %v, not \"sample 2\"", slices.Sorted(maps.Keys(specs.KernelSpecs)))
	}
	// Jupyter lists kernel.js and kernel.css by file name and the logos without extension.
	if got := slices.Sorted(maps.Keys(sample.Resources)); !slices.Equal(got, []string{"kernel.js", "logo-64x64"}) {
		t.Errorf("resources of sample 2: %v", sample.Resources)
	}
	for res, file := range map[string]string{"kernel.js": "kernel.js", "logo-64x64": "logo-64x64.png"} {
		// Jupyter Server writes the name into the URL as it is; nbkube escapes it.
		if u, err := url.PathUnescape(sample.Resources[res]); err != nil || u != "/kernelspecs/sample 2/"+file {
			t.Errorf("resource %s at %q", res, sample.Resources[res])
		}
	}
	if got := slices.Sorted(maps.Keys(specs.KernelSpecs["python3"].Resources)); !slices.Equal(got, []string{"logo-32x32", "logo-64x64", "logo-svg"}) {
		t.Errorf("resources of python3: %v", got)
	}

	var one struct {
		Name string `json:"name"`
	}
	api.getJSON(t, "api/kernelspecs/sample%202", &one)
	if one.Name != "sample 2" {
		t.Errorf("GET /api/kernelspecs/sample%%202: name %q", one.Name)
	}
	// "python" is a name for starting kernels only.
	api.call(t, http.MethodGet, "api/kernelspecs/python", nil).want(t, http.StatusNotFound)

	// Every file of the spec's directory is served, kernel.json included.
	for name, content := range files {
		r := api.call(t, http.MethodGet, "kernelspecs/sample%202/"+name, nil).want(t, http.StatusOK)
		if !bytes.Equal(r.body, content) {
			t.Errorf("GET /kernelspecs/sample%%202/%s: %q, want %q", name, r.body, content)
		}
	}
	api.call(t, http.MethodGet, "kernelspecs/sample%202/missing.js", nil).want(t, http.StatusNotFound)

	var k kernelModel
	api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "sample 2"}).want(t, http.StatusCreated).decode(t, &k)
	t.Cleanup(func() { api.deleteQuietly("api/kernels/" + k.ID) })
	if k.Name != "sample 2" {
		t.Errorf("POST /api/kernels {\"name\": \"sample 2\"}: kernel name %q", k.Name)
	}
	api.getJSON(t, "api/kernels/"+k.ID, &k)
	if k.Name != "sample 2" {
		t.Errorf("GET /api/kernels/%s: kernel name %q", k.ID, k.Name)
	}
	api.call(t, http.MethodDelete, "api/kernels/"+k.ID, nil).want(t, http.StatusNoContent)
}

func testPythonIsPython3(t *testing.T, api *jupyterAPI) {
	var k kernelModel
	api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python"}).want(t, http.StatusCreated).decode(t, &k)
	t.Cleanup(func() { api.deleteQuietly("api/kernels/" + k.ID) })
	if k.Name != "python3" {
		t.Errorf("POST /api/kernels {\"name\": \"python\"}: kernel name %q, want python3", k.Name)
	}
	api.call(t, http.MethodDelete, "api/kernels/"+k.ID, nil).want(t, http.StatusNoContent)

	s := createSession(t, api, map[string]any{"path": "python.ipynb", "type": "notebook", "kernel": map[string]any{"name": "python"}})
	if s.Kernel.Name != "python3" {
		t.Errorf("session with kernel name python: kernel %+v, want python3", s.Kernel)
	}
	api.call(t, http.MethodDelete, "api/sessions/"+s.ID, nil).want(t, http.StatusNoContent)
}

func testSessionWithAnUnknownKernelID(t *testing.T, api *jupyterAPI) {
	// Jupyter starts a kernel of the name when the id names none...
	s := createSession(t, api, map[string]any{"path": "unknown-id.ipynb", "type": "notebook",
		"kernel": map[string]any{"name": "sample 2", "id": unknownKernelID}})
	if s.Kernel.ID == unknownKernelID || s.Kernel.Name != "sample 2" {
		t.Errorf("session with an unknown kernel id and name sample 2: kernel %+v", s.Kernel)
	}
	// ...and PATCH refuses an unknown id.
	r := api.call(t, http.MethodPatch, "api/sessions/"+s.ID, map[string]any{"kernel": map[string]any{"id": unknownKernelID}}).want(t, http.StatusBadRequest)
	if e := r.jupyterError(t); e.Message != "No such kernel: "+unknownKernelID {
		t.Errorf("PATCH with an unknown kernel id: message %q", e.Message)
	}
	api.call(t, http.MethodDelete, "api/sessions/"+s.ID, nil).want(t, http.StatusNoContent)

	// The older session model, and an id alone: the default kernel starts.
	s = createSession(t, api, map[string]any{"notebook": map[string]any{"path": "older.ipynb"}, "kernel": map[string]any{"id": unknownKernelID}})
	if s.Kernel.ID == unknownKernelID || s.Kernel.Name != "python3" {
		t.Errorf("older session model with an unknown kernel id: kernel %+v, want a new python3", s.Kernel)
	}
	api.call(t, http.MethodDelete, "api/sessions/"+s.ID, nil).want(t, http.StatusNoContent)
}

// createSession posts body to /api/sessions, which must answer 201 with a kernel; the session
// is deleted when the test ends.
func createSession(t *testing.T, api *jupyterAPI, body map[string]any) sessionModel {
	t.Helper()
	var s sessionModel
	api.call(t, http.MethodPost, "api/sessions", body).want(t, http.StatusCreated).decode(t, &s)
	t.Cleanup(func() { api.deleteQuietly("api/sessions/" + s.ID) })
	if s.Kernel == nil || s.Kernel.ID == "" {
		t.Fatalf("POST /api/sessions %v: session %+v without a kernel", body, s)
	}
	return s
}

// startJupyterServer runs Debian's Jupyter Server with the kernel specs of dataDir and the
// system's, in throw-away directories otherwise, and returns its API once it answers. It is
// stopped (SIGTERM, as a user stops it) at cleanup.
func startJupyterServer(t *testing.T, dataDir string) *jupyterAPI {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"root", "config", "runtime", "ipython"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	host, port, err := net.SplitHostPort(testenv.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	jupyter := newJupyterAPI("http://"+net.JoinHostPort(host, port)+"/", randomID(), time.Minute)
	cmd := exec.Command("/usr/bin/python3", "-m", "jupyter_server", "--no-browser", "--allow-root",
		"--ip="+host, "--port="+port, "--port-retries=0",
		"--ServerApp.token="+jupyter.token, "--ServerApp.root_dir="+filepath.Join(dir, "root"))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JUPYTER_") && !strings.HasPrefix(kv, "IPYTHONDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		"JUPYTER_CONFIG_DIR="+filepath.Join(dir, "config"), "JUPYTER_DATA_DIR="+dataDir,
		"JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"), "IPYTHONDIR="+filepath.Join(dir, "ipython"))
	exited := startServer(t, "jupyter-server", cmd, syscall.SIGTERM)
	testenv.Eventually(t, "Jupyter Server answers "+jupyter.base, 60*time.Second, func() error {
		select {
		case <-exited:
			t.Fatalf("Jupyter Server exited before it answered")
		default:
		}
		return jupyter.answers(t)
	})
	return jupyter
}
