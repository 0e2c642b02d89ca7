package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/kernelspecs"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/testenv"
)

// debianKernels holds the kernel spec of Debian's python3-ipykernel.
const debianKernels = "/usr/share/jupyter/kernels"

func TestKernelSpecs(t *testing.T) {
	c := testenv.KubeClient(t)
	// kernelSpecServer serves the KernelSpecs of a fresh namespace, and the host's of dirs.
	kernelSpecServer := func(t *testing.T, dirs []string, opts ...serverOption) (*testServer, string) {
		ns := testenv.Namespace(t, c)
		repo := &repository.KernelSpecs{Reader: c, Namespace: ns}
		if dirs != nil {
			repo.Host = &kernelspecs.Host{Client: c, Namespace: ns, Dirs: dirs}
		}
		return newServer(t, append([]serverOption{func(o *apiserver.Options) { o.KernelSpecs = repo }}, opts...)...), ns
	}
	create := func(t *testing.T, objs ...*nbv1.KernelSpec) {
		t.Helper()
		for _, o := range objs {
			if err := c.Create(t.Context(), o); err != nil {
				t.Fatal(err)
			}
		}
	}

	t.Run("ModelsMatchJupyterServersForDebiansPython3", func(t *testing.T) {
		logo, err := os.ReadFile(filepath.Join(debianKernels, "python3", "logo-64x64.png"))
		if err != nil {
			t.Fatalf("Debian's python3-ipykernel kernel spec: %v", err)
		}
		s, _ := kernelSpecServer(t, []string{debianKernels}, func(o *apiserver.Options) { o.BaseURL = "/base/" })
		// The testdata are Jupyter Server 1.23's answers for the same kernel.json, from
		//   /usr/bin/python3 -m jupyter_server --allow-root --ServerApp.token=t --port=18931 \
		//     --no-browser --ServerApp.base_url=/base/
		//   curl -H "Authorization: token t" http://127.0.0.1:18931/base/api/kernelspecs
		//   curl -H "Authorization: token t" http://127.0.0.1:18931/base/api/kernelspecs/Python3
		for path, golden := range map[string]string{
			"/base/api/kernelspecs":         "jupyter-server-kernelspecs.json",
			"/base/api/kernelspecs/Python3": "jupyter-server-kernelspec-Python3.json",
		} {
			r := s.do("GET", path, nil)
			expect(t, r, http.StatusOK)
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("%s: Content-Type %q", path, ct)
			}
			want := readJSON(t, filepath.Join("testdata", golden))
			if d := cmp.Diff(want, r.json(t)); d != "" {
				t.Errorf("%s (-Jupyter Server +nbkube):\n%s", path, d)
			}
		}
		r := s.do("GET", "/base/kernelspecs/python3/logo-64x64.png", nil)
		expect(t, r, http.StatusOK)
		if string(r.body) != string(logo) || r.header.Get("Content-Type") != "image/png" || r.header.Get("Cache-Control") != "max-age=2592000" {
			t.Errorf("logo: %d bytes, headers %v", len(r.body), r.header)
		}
		for _, file := range []string{"logo-32x32.png", "logo-svg.svg", "kernel.json"} {
			want, err := os.ReadFile(filepath.Join(debianKernels, "python3", file))
			if err != nil {
				t.Fatal(err)
			}
			if r := s.do("GET", "/base/kernelspecs/python3/"+file, nil); r.status != http.StatusOK || string(r.body) != string(want) {
				t.Errorf("%s: %d, %d bytes, want %d", file, r.status, len(r.body), len(want))
			}
		}
	})

	t.Run("ModelFillsJupyterDefaultsAndCarriesEverythingElse", func(t *testing.T) {
		s, ns := kernelSpecServer(t, nil)
		bare := kernelSpec(ns, "bare")
		full := kernelSpec(ns, "full")
		full.Spec.InterruptMode = nbv1.InterruptModeMessage
		full.Spec.Env = map[string]string{"A": "1"}
		full.Spec.Metadata = &apiextensionsv1.JSON{Raw: []byte(`{"debugger":true,"nested":{"x":[1,2]}}`)}
		full.Spec.Logo = &nbv1.KernelLogo{FileName: "logo-svg.svg", Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)}
		create(t, bare, full)

		got := s.do("GET", "/api/kernelspecs", nil).json(t)
		want := map[string]any{
			"default": "bare",
			"kernelspecs": map[string]any{
				"bare": map[string]any{"name": "bare", "resources": map[string]any{}, "spec": map[string]any{
					"argv":         []any{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
					"env":          map[string]any{},
					"display_name": "Kernel bare", "language": "python", "interrupt_mode": "signal",
					"metadata": map[string]any{},
				}},
				"full": map[string]any{"name": "full", "resources": map[string]any{"logo-svg": "/kernelspecs/full/logo-svg.svg"}, "spec": map[string]any{
					"argv":         []any{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
					"env":          map[string]any{"A": "1"},
					"display_name": "Kernel full", "language": "python", "interrupt_mode": "message",
					"metadata": map[string]any{"debugger": true, "nested": map[string]any{"x": []any{1.0, 2.0}}},
				}},
			},
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})

	t.Run("GetMatchesCaseInsensitivelyAndAnswers404ForUnknownNames", func(t *testing.T) {
		s, ns := kernelSpecServer(t, nil)
		create(t, kernelSpec(ns, "r"))
		m := s.do("GET", "/api/kernelspecs/R", nil).json(t)
		if m["name"] != "R" || m["spec"].(map[string]any)["display_name"] != "Kernel r" {
			t.Errorf("GET R: %v", m)
		}
		for _, name := range []string{"nope", "my_kernel", "a%2Fb"} {
			r := s.do("GET", "/api/kernelspecs/"+name, nil)
			expect(t, r, http.StatusNotFound)
			if msg := r.json(t)["message"]; !strings.HasPrefix(msg.(string), "Kernel spec ") || !strings.HasSuffix(msg.(string), " not found") {
				t.Errorf("%s: message %q", name, msg)
			}
		}
		if msg := s.do("GET", "/api/kernelspecs/nope", nil).json(t)["message"]; msg != "Kernel spec nope not found" {
			t.Errorf("message %q, want Jupyter's", msg)
		}
		expect(t, s.do("GET", "/api/kernelspecs/r", nil, "Authorization", ""), http.StatusForbidden)
	})

	t.Run("ResourcesAreTheFilesOfTheSpec", func(t *testing.T) {
		s, ns := kernelSpecServer(t, nil)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "svg-files", Namespace: ns},
			Data:       map[string]string{"kernel.js": "define([], {});", "kernel.css": "body {}", "page.html": "<script>alert(1)</script>"},
			BinaryData: map[string][]byte{"data.bin": {0, 1, 2, 0xff}},
		}
		svg := kernelSpec(ns, "svg")
		svg.Spec.Logo = &nbv1.KernelLogo{FileName: "logo-svg.svg", Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)}
		svg.Spec.Files = &nbv1.KernelSpecFiles{ConfigMapName: cm.Name}
		if err := c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		create(t, svg, kernelSpec(ns, "nologo"))

		resources := s.do("GET", "/api/kernelspecs/svg", nil).json(t)["resources"]
		if d := cmp.Diff(map[string]any{"kernel.js": "/kernelspecs/svg/kernel.js", "kernel.css": "/kernelspecs/svg/kernel.css",
			"logo-svg": "/kernelspecs/svg/logo-svg.svg"}, resources); d != "" {
			t.Errorf("resources (-want +got):\n%s", d)
		}
		for file, want := range map[string]struct{ body, contentType string }{
			"logo-svg.svg": {string(svg.Spec.Logo.Data), "image/svg+xml"},
			"kernel.js":    {"define([], {});", "text/javascript; charset=utf-8"},
			"kernel.css":   {"body {}", "text/css; charset=utf-8"},
			"page.html":    {"<script>alert(1)</script>", "text/html; charset=utf-8"},
			"data.bin":     {"\x00\x01\x02\xff", "application/octet-stream"},
		} {
			r := s.do("GET", "/kernelspecs/SVG/"+file, nil)
			expect(t, r, http.StatusOK)
			if string(r.body) != want.body || r.header.Get("Content-Type") != want.contentType || r.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: %q, headers %v", file, r.body, r.header)
			}
			// An SVG or HTML file opened on its own must not run scripts.
			if csp := r.header.Get("Content-Security-Policy"); !strings.HasSuffix(csp, "; sandbox") {
				t.Errorf("%s may run scripts: CSP %q", file, csp)
			}
		}
		if r := s.do("HEAD", "/kernelspecs/svg/logo-svg.svg", nil); r.status != http.StatusOK || len(r.body) != 0 || r.header.Get("Content-Length") != strconv.Itoa(len(svg.Spec.Logo.Data)) {
			t.Errorf("HEAD: %d, %q, %v", r.status, r.body, r.header)
		}
		etag := s.do("GET", "/kernelspecs/svg/kernel.js", nil).header.Get("Etag")
		if r := s.do("GET", "/kernelspecs/svg/kernel.js", nil, "If-None-Match", etag); etag == "" || r.status != http.StatusNotModified {
			t.Errorf("revalidation with Etag %q: %d", etag, r.status)
		}
		// Only files at the top of a spec exist; nothing leads out of it.
		for _, p := range []string{
			"/kernelspecs/svg/kernel.json", "/kernelspecs/svg/logo-64x64.png", "/kernelspecs/svg/x/logo-svg.svg",
			"/kernelspecs/svg/..%2Fnologo%2Fkernel.js", "/kernelspecs/svg/%2E%2E", "/kernelspecs/svg/%2Fkernel.js",
			"/kernelspecs/nologo/logo-svg.svg", "/kernelspecs/nologo/kernel.js", "/kernelspecs/nope/logo-svg.svg",
		} {
			expect(t, s.do("GET", p, nil), http.StatusNotFound)
		}
	})

	t.Run("NamesThatCannotBeResourceNames", func(t *testing.T) {
		dir := t.TempDir()
		d := filepath.Join(dir, "sample 2")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, content := range map[string]string{
			"kernel.json": `{"argv":["R","{connection_file}"],"display_name":"Sample 2","language":"R"}`,
			"kernel.js":   "define([], {});",
		} {
			if err := os.WriteFile(filepath.Join(d, file), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, _ := kernelSpecServer(t, []string{dir})
		specs := s.do("GET", "/api/kernelspecs", nil).json(t)["kernelspecs"].(map[string]any)
		sample, ok := specs["sample 2"].(map[string]any)
		if !ok || sample["name"] != "sample 2" {
			t.Fatalf("kernel specs %v, want sample 2", specs)
		}
		js := sample["resources"].(map[string]any)["kernel.js"]
		if js != "/kernelspecs/sample%202/kernel.js" {
			t.Errorf("kernel.js at %v", js)
		}
		if r := s.do("GET", js.(string), nil); r.status != http.StatusOK || string(r.body) != "define([], {});" {
			t.Errorf("GET %s: %d %q", js, r.status, r.body)
		}
		for _, name := range []string{"sample%202", "Sample%202"} {
			r := s.do("GET", "/api/kernelspecs/"+name, nil)
			expect(t, r, http.StatusOK)
			if got, _ := url.PathUnescape(name); r.json(t)["name"] != got {
				t.Errorf("GET %s: name %v", name, r.json(t)["name"])
			}
		}
	})

	t.Run("DefaultIsTheConfiguredSpecOrTheFirstByName", func(t *testing.T) {
		ns := testenv.Namespace(t, c)
		repo := &repository.KernelSpecs{Reader: c, Namespace: ns}
		defaultOf := func(configured string) any {
			s := newServer(t, func(o *apiserver.Options) { o.KernelSpecs, o.DefaultKernelSpec = repo, configured })
			return s.do("GET", "/api/kernelspecs", nil).json(t)["default"]
		}
		if d := defaultOf(""); d != "python3" {
			t.Errorf("default without specs %v, want Jupyter's python3", d)
		}
		create(t, kernelSpec(ns, "r"), kernelSpec(ns, "julia"))
		if d := defaultOf(""); d != "julia" {
			t.Errorf("default without python3 %v, want the first by name", d)
		}
		if d := defaultOf("R"); d != "r" {
			t.Errorf("configured default %v, want r", d)
		}
		create(t, kernelSpec(ns, "python3"))
		if d := defaultOf(""); d != "python3" {
			t.Errorf("default %v, want python3", d)
		}
	})

	t.Run("HostSpecsAddedOrRemovedShowInTheNextResponse", func(t *testing.T) {
		dir := t.TempDir()
		s, _ := kernelSpecServer(t, []string{dir})
		listed := func() []string {
			var names []string
			for name := range s.do("GET", "/api/kernelspecs", nil).json(t)["kernelspecs"].(map[string]any) {
				names = append(names, name)
			}
			return names
		}
		if got := listed(); len(got) != 0 {
			t.Errorf("listed %v on an empty host", got)
		}
		d := filepath.Join(dir, "ir")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kernel.json"), []byte(`{"argv":["R","{connection_file}"],"display_name":"R","language":"R"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := listed(); !cmp.Equal(got, []string{"ir"}) {
			t.Errorf("after adding ir: %v", got)
		}
		expect(t, s.do("GET", "/api/kernelspecs/ir", nil), http.StatusOK)
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
		if got := listed(); len(got) != 0 {
			t.Errorf("after removing ir: %v", got)
		}
		expect(t, s.do("GET", "/api/kernelspecs/ir", nil), http.StatusNotFound)
	})
}

// kernelSpec is a valid KernelSpec as an admin would apply it.
func kernelSpec(namespace, name string) *nbv1.KernelSpec {
	return &nbv1.KernelSpec{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: nbv1.KernelSpecSpec{
			DisplayName: "Kernel " + name,
			Language:    "python",
			Argv:        []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
		},
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
