package kernelspecs

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/testenv"
)

func TestFingerprint_ChangesWithTheSpecsOnly(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "ir", `{"argv":["R"]}`)
	if err := os.Mkdir(filepath.Join(dir, "ir", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := fingerprint([]string{dir, filepath.Join(dir, "missing")})
	// Neither a file beside the spec directories nor one in a spec's subdirectory is read.
	writeFile(t, filepath.Join(dir, "README"), "not a spec")
	writeFile(t, filepath.Join(dir, "ir", "sub", "nested.js"), "//")
	if got := fingerprint([]string{dir, filepath.Join(dir, "missing")}); got != before {
		t.Errorf("files Find does not read changed the fingerprint:\n%s\n%s", before, got)
	}

	changes := map[string]func(){
		"spec added":   func() { writeSpec(t, dir, "julia", `{"argv":["julia"]}`) },
		"spec edited":  func() { writeSpec(t, dir, "ir", `{"argv":["R", "--vanilla"]}`) },
		"logo added":   func() { writeFile(t, filepath.Join(dir, "ir", "logo-svg.svg"), "<svg/>") },
		"file added":   func() { writeFile(t, filepath.Join(dir, "ir", "kernel.js"), "//") },
		"spec removed": func() { removeAll(t, filepath.Join(dir, "julia")) },
		"touched": func() {
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(filepath.Join(dir, "ir", "kernel.json"), later, later); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, what := range []string{"spec added", "spec edited", "logo added", "file added", "spec removed", "touched"} {
		prev := fingerprint([]string{dir})
		changes[what]()
		if fingerprint([]string{dir}) == prev {
			t.Errorf("%s: fingerprint unchanged", what)
		}
	}
}

func TestFind_TakesTheFilesAConfigMapCanHold(t *testing.T) {
	dir := t.TempDir()
	writeSpec(t, dir, "big", `{"argv":["x"]}`)
	d := filepath.Join(dir, "big")
	js := "define([], function () {});"
	writeFile(t, filepath.Join(d, "kernel.js"), js)
	// Taken in order: kernel.js and kernel.json first, then by name, while they fit.
	writeFile(t, filepath.Join(d, "a-large.bin"), strings.Repeat("\xff", 900<<10))
	writeFile(t, filepath.Join(d, "b-too-much.txt"), strings.Repeat("x", 200<<10))
	writeFile(t, filepath.Join(d, "c-small.txt"), "small")
	writeFile(t, filepath.Join(d, "not a key.txt"), "spaces")
	if err := os.Mkdir(filepath.Join(d, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nonexistent", filepath.Join(d, "dangling")); err != nil {
		t.Fatal(err)
	}
	specs, errs := Find([]string{dir})
	if len(errs) > 0 || len(specs) != 1 {
		t.Fatalf("specs %v, errors %v", specs, errs)
	}
	s := specs[0]
	var got []string
	for name := range s.Files {
		got = append(got, name)
	}
	slices.Sort(got)
	if d := cmp.Diff([]string{"a-large.bin", "c-small.txt", "kernel.js", "kernel.json"}, got); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
	if string(s.Files["kernel.js"]) != js {
		t.Errorf("kernel.js %q", s.Files["kernel.js"])
	}
	skipped := strings.Join(s.Skipped, "\n")
	for _, name := range []string{"b-too-much.txt", "not a key.txt", "sub/", "dangling"} {
		if !strings.Contains(skipped, name) {
			t.Errorf("%s not reported as left out: %v", name, s.Skipped)
		}
	}

	ks, err := s.Resource("ns")
	if err != nil {
		t.Fatal(err)
	}
	cm := s.FilesConfigMap(ks)
	size := 0
	for k, v := range cm.Data {
		size += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		size += len(k) + len(v)
	}
	if size > corev1.MaxSecretSize || len(cm.BinaryData["a-large.bin"]) != 900<<10 || cm.Data["c-small.txt"] != "small" {
		t.Errorf("ConfigMap of %d bytes, binaryData %v keys, data %v keys", size, len(cm.BinaryData), len(cm.Data))
	}
}

func TestHost_Refresh(t *testing.T) {
	c := testenv.KubeClient(t)

	t.Run("SyncsOnlyWhenTheDirectoriesChanged", func(t *testing.T) {
		dir := t.TempDir()
		writeSpec(t, dir, "ir", `{"argv":["R","{connection_file}"],"display_name":"R","language":"R"}`)
		// Jupyter allows the name; no KernelSpec can have it. It is reported once, not
		// retried on every refresh.
		writeSpec(t, dir, "tab\tkernel", `{"argv":["x","{connection_file}"],"display_name":"X","language":"x"}`)
		h := &Host{Client: c, Namespace: testenv.Namespace(t, c), Dirs: []string{dir}}
		names, synced, err := h.Refresh(t.Context())
		if !synced || err == nil || !slices.Equal(names, []string{"ir"}) {
			t.Errorf("first refresh: %v, %v, %v; want ir synced and the tab reported", names, synced, err)
		}
		if _, synced, err := h.Refresh(t.Context()); synced || err != nil {
			t.Errorf("refresh without a change synced (%v, %v)", synced, err)
		}
		writeSpec(t, dir, "julia", `{"argv":["julia","{connection_file}"],"display_name":"Julia","language":"julia"}`)
		if names, synced, _ := h.Refresh(t.Context()); !synced || !slices.Equal(names, []string{"ir", "julia"}) {
			t.Errorf("refresh after a change: %v, %v", names, synced)
		}
	})

	t.Run("NamesThatCannotBeResourceNamesAreKeptAsKernelNames", func(t *testing.T) {
		dir := t.TempDir()
		writeSpec(t, dir, "Sample 2", `{"argv":["x","{connection_file}"],"display_name":"Sample","language":"x"}`)
		writeSpec(t, dir, "my_kernel", `{"argv":["x","{connection_file}"],"display_name":"Mine","language":"x"}`)
		ns := testenv.Namespace(t, c)
		h := &Host{Client: c, Namespace: ns, Dirs: []string{dir}}
		if names, _, err := h.Refresh(t.Context()); err != nil || !slices.Equal(names, []string{"my_kernel", "sample 2"}) {
			t.Fatalf("refresh: %v, %v", names, err)
		}
		var list nbv1.KernelSpecList
		if err := c.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, ks := range list.Items {
			got[ks.Name] = ks.Spec.KernelName
		}
		if d := cmp.Diff(map[string]string{"my-kernel-dc86feef": "my_kernel", "sample-2-76c7b704": "sample 2"}, got); d != "" {
			t.Errorf("resource names to kernel names (-want +got):\n%s", d)
		}
	})

	t.Run("FilesGoToAConfigMapOfTheHostsOwnedByTheSpec", func(t *testing.T) {
		dir := t.TempDir()
		writeSpec(t, dir, "ir", `{"argv":["R","{connection_file}"],"display_name":"R","language":"R"}`)
		png := "\x89PNG\r\n\x1a\nrest"
		writeFile(t, filepath.Join(dir, "ir", "logo-64x64.png"), png)
		writeFile(t, filepath.Join(dir, "ir", "kernel.js"), "define([], {});")
		writeSpec(t, dir, "julia", `{"argv":["julia","{connection_file}"],"display_name":"Julia","language":"julia"}`)
		ns := testenv.Namespace(t, c)
		// An admin's ConfigMap that julia's would replace: it stays as it is, and julia goes
		// without files.
		admins := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "julia", Namespace: ns}, Data: map[string]string{"x": "admin"}}
		if err := c.Create(t.Context(), admins); err != nil {
			t.Fatal(err)
		}
		h := &Host{Client: c, Namespace: ns, Dirs: []string{dir}}
		if names, _, err := h.Refresh(t.Context()); err == nil || !slices.Equal(names, []string{"ir", "julia"}) {
			t.Fatalf("refresh: %v, %v; want julia's ConfigMap reported", names, err)
		}

		ir, cm := &nbv1.KernelSpec{}, &corev1.ConfigMap{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "ir"}, ir); err != nil {
			t.Fatal(err)
		}
		if ir.Spec.Files == nil || ir.Spec.Files.ConfigMapName != "ir" {
			t.Fatalf("ir files %+v", ir.Spec.Files)
		}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "ir"}, cm); err != nil {
			t.Fatal(err)
		}
		if string(cm.BinaryData["logo-64x64.png"]) != png || cm.Data["kernel.js"] != "define([], {});" || cm.Data["kernel.json"] == "" {
			t.Errorf("ir's ConfigMap: data %v, binaryData %v", cm.Data, cm.BinaryData)
		}
		if refs := cm.OwnerReferences; len(refs) != 1 || refs[0].UID != ir.UID || refs[0].Kind != "KernelSpec" {
			t.Errorf("ir's ConfigMap owners %+v", refs)
		}
		julia := &nbv1.KernelSpec{}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "julia"}, julia); err != nil || julia.Spec.Files != nil {
			t.Errorf("julia %+v, %v; want no files", julia.Spec.Files, err)
		}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(admins), cm); err != nil || !maps.Equal(cm.Data, admins.Data) {
			t.Errorf("the admin's ConfigMap: %v, %v", cm.Data, err)
		}

		// A file removed goes from the ConfigMap; a spec removed takes its ConfigMap along.
		removeAll(t, filepath.Join(dir, "ir", "kernel.js"))
		if _, _, err := h.Refresh(t.Context()); err == nil {
			t.Fatal("julia's ConfigMap not reported again")
		}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "ir"}, cm); err != nil || cm.Data["kernel.js"] != "" {
			t.Errorf("ir's ConfigMap after kernel.js went: %v, %v", cm.Data, err)
		}
		removeAll(t, filepath.Join(dir, "ir"))
		if _, _, err := h.Refresh(t.Context()); err == nil {
			t.Fatal("julia's ConfigMap not reported again")
		}
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "ir"}, cm); !apierrors.IsNotFound(err) {
			t.Errorf("ir's ConfigMap after ir went: %v", err)
		}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(admins), cm); err != nil {
			t.Errorf("the admin's ConfigMap: %v", err)
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
