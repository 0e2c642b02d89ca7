package kernelspecs

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/testenv"
)

func TestFingerprint_ChangesWithTheSpecsOnly(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "ir", `{"argv":["R"]}`)
	before := fingerprint([]string{dir, filepath.Join(dir, "missing")})
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not a spec"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ir", "kernel.js"), []byte("//"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := fingerprint([]string{dir, filepath.Join(dir, "missing")}); got != before {
		t.Errorf("files Find does not read changed the fingerprint:\n%s\n%s", before, got)
	}

	changes := map[string]func(){
		"spec added":   func() { writeSpec(t, dir, "julia", `{"argv":["julia"]}`) },
		"spec edited":  func() { writeSpec(t, dir, "ir", `{"argv":["R", "--vanilla"]}`) },
		"logo added":   func() { writeFile(t, filepath.Join(dir, "ir", "logo-svg.svg"), "<svg/>") },
		"spec removed": func() { removeAll(t, filepath.Join(dir, "julia")) },
		"touched": func() {
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(filepath.Join(dir, "ir", "kernel.json"), later, later); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, what := range []string{"spec added", "spec edited", "logo added", "spec removed", "touched"} {
		prev := fingerprint([]string{dir})
		changes[what]()
		if fingerprint([]string{dir}) == prev {
			t.Errorf("%s: fingerprint unchanged", what)
		}
	}
}

func TestFind_SkipsLogosOverTheCRDLimit(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "big", `{"argv":["x"]}`)
	writeFile(t, filepath.Join(dir, "big", "logo-64x64.png"), string(bytes.Repeat([]byte("x"), maxLogo+1)))
	writeFile(t, filepath.Join(dir, "big", "logo-32x32.png"), "small")
	specs, errs := Find([]string{dir})
	if len(errs) > 0 || len(specs) != 1 {
		t.Fatalf("specs %v, errors %v", specs, errs)
	}
	if l := specs[0].Logo; l == nil || l.FileName != "logo-32x32.png" {
		t.Errorf("logo %+v, want the 32x32 one that fits", l)
	}
}

func TestHost_Refresh(t *testing.T) {
	c := testenv.KubeClient(t)

	t.Run("SyncsOnlyWhenTheDirectoriesChanged", func(t *testing.T) {
		dir := t.TempDir()
		writeSpec(t, dir, "ir", `{"argv":["R","{connection_file}"],"display_name":"R","language":"R"}`)
		// Jupyter allows the name; a resource cannot have it. It is reported once, not
		// retried on every refresh.
		writeSpec(t, dir, "my_kernel", `{"argv":["x","{connection_file}"],"display_name":"X","language":"x"}`)
		h := &Host{Client: c, Namespace: testenv.Namespace(t, c), Dirs: []string{dir}}
		names, synced, err := h.Refresh(t.Context())
		if !synced || err == nil || !slices.Equal(names, []string{"ir"}) {
			t.Errorf("first refresh: %v, %v, %v; want ir synced and my_kernel reported", names, synced, err)
		}
		if _, synced, err := h.Refresh(t.Context()); synced || err != nil {
			t.Errorf("refresh without a change synced (%v, %v)", synced, err)
		}
		writeSpec(t, dir, "julia", `{"argv":["julia","{connection_file}"],"display_name":"Julia","language":"julia"}`)
		if names, synced, _ := h.Refresh(t.Context()); !synced || !slices.Equal(names, []string{"ir", "julia"}) {
			t.Errorf("refresh after a change: %v, %v", names, synced)
		}
	})

	t.Run("FailedWritesAreRetried", func(t *testing.T) {
		dir := t.TempDir()
		writeSpec(t, dir, "ir", `{"argv":["R","{connection_file}"],"display_name":"R","language":"R"}`)
		ns := "created-later"
		h := &Host{Client: c, Namespace: ns, Dirs: []string{dir}}
		if _, _, err := h.Refresh(t.Context()); err == nil {
			t.Fatal("sync into a missing namespace succeeded")
		}
		if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		if names, synced, err := h.Refresh(t.Context()); !synced || err != nil || !slices.Equal(names, []string{"ir"}) {
			t.Errorf("retry: %v, %v, %v", names, synced, err)
		}
	})

	t.Run("AddsIPyKernelsSpecWhenNoKernelJSONIsPython3", func(t *testing.T) {
		dir := t.TempDir()
		writeSpec(t, dir, "ir", `{"argv":["R","{connection_file}"],"display_name":"R","language":"R"}`)
		ns := testenv.Namespace(t, c)
		h := &Host{Client: c, Namespace: ns, Dirs: []string{dir}, Python: []string{"/usr/bin/python3"}}
		if names, _, err := h.Refresh(t.Context()); err != nil || !slices.Equal(names, []string{"ir", "python3"}) {
			t.Fatalf("refresh: %v, %v", names, err)
		}
		py := &nbv1.KernelSpec{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "python3"}, py); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"}, py.Spec.Argv); d != "" {
			t.Errorf("argv (-want +got):\n%s", d)
		}

		// A python3 kernel.json is taken as it is.
		writeSpec(t, dir, "Python3", `{"argv":["/opt/py","-f","{connection_file}"],"display_name":"Mine","language":"python"}`)
		if _, _, err := h.Refresh(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "python3"}, py); err != nil || py.Spec.DisplayName != "Mine" {
			t.Errorf("python3 %+v, %v", py.Spec, err)
		}
	})
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func removeAll(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}
