package repository_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/kernelspecs"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/testenv"
)

func adminSpec(namespace, name, displayName string) *nbv1.KernelSpec {
	return &nbv1.KernelSpec{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: nbv1.KernelSpecSpec{
			DisplayName: displayName,
			Language:    "python",
			Argv:        []string{"python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"},
		},
	}
}

func writeHostSpec(t *testing.T, dir, name, kernelJSON string, files map[string][]byte) {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	files["kernel.json"] = []byte(kernelJSON)
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(d, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func names(specs []jupyter.KernelSpec) []string {
	out := []string{}
	for _, ks := range specs {
		out = append(out, ks.Name)
	}
	return out
}

func TestKernelSpecs(t *testing.T) {
	c := testenv.KubeClient(t)

	t.Run("ListIsSortedAndGetMatchesNamesCaseInsensitively", func(t *testing.T) {
		ns := testenv.Namespace(t, c)
		for _, ks := range []*nbv1.KernelSpec{adminSpec(ns, "r", "R"), adminSpec(ns, "python3", "Python 3"), adminSpec(testenv.Namespace(t, c), "elsewhere", "X")} {
			if err := c.Create(t.Context(), ks); err != nil {
				t.Fatal(err)
			}
		}
		repo := &repository.KernelSpecs{Reader: c, Namespace: ns}
		list, err := repo.ListKernelSpecs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"python3", "r"}, names(list)); d != "" {
			t.Errorf("listed (-want +got):\n%s", d)
		}
		for _, name := range []string{"python3", "Python3", "PYTHON3"} {
			ks, err := repo.GetKernelSpec(t.Context(), name)
			if err != nil || ks.Spec.DisplayName != "Python 3" {
				t.Errorf("get %s: %v, %v", name, ks, err)
			}
		}
	})

	t.Run("MissingAndImpossibleNamesAreNotFound", func(t *testing.T) {
		repo := &repository.KernelSpecs{Reader: c, Namespace: testenv.Namespace(t, c)}
		for _, name := range []string{"nope", "my_kernel", "a/b", "..", ""} {
			_, err := repo.GetKernelSpec(t.Context(), name)
			if !errors.Is(err, domainerr.ErrNotFound) {
				t.Errorf("get %q: %v, want domainerr.ErrNotFound", name, err)
			}
		}
		if _, err := repo.GetKernelSpec(t.Context(), "nope"); err == nil || err.Error() != "Kernel spec nope not found" {
			t.Errorf("message %v, want Jupyter's", err)
		}
	})

	t.Run("HostSpecsAddedOrRemovedShowInTheNextAnswer", func(t *testing.T) {
		ns := testenv.Namespace(t, c)
		if err := c.Create(t.Context(), adminSpec(ns, "python3", "The admin's")); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		writeHostSpec(t, dir, "Julia-1.10", `{"argv":["julia","{connection_file}"],"display_name":"Julia","language":"julia"}`, map[string][]byte{})
		// The host's python3 does not replace the one an admin made.
		writeHostSpec(t, dir, "python3", `{"argv":["/usr/bin/python3","-f","{connection_file}"],"display_name":"Host","language":"python"}`, map[string][]byte{})
		host := &kernelspecs.Host{Client: c, Namespace: ns, Dirs: []string{dir}}
		repo := &repository.KernelSpecs{Namespace: ns, Host: host}

		list, err := repo.ListKernelSpecs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"julia-1.10", "python3"}, names(list)); d != "" {
			t.Errorf("first answer (-want +got):\n%s", d)
		}

		logo := []byte("\x89PNG\r\n\x1a\nlogo")
		writeHostSpec(t, dir, "ir", `{"argv":["R","{connection_file}"],"display_name":"R","language":"R","interrupt_mode":"message"}`,
			map[string][]byte{"logo-64x64.png": logo})
		ks, err := repo.GetKernelSpec(t.Context(), "IR")
		if err != nil {
			t.Fatalf("added spec not in the next answer: %v", err)
		}
		if ks.Resources["logo-64x64"] != "logo-64x64.png" || ks.Spec.InterruptMode != string(nbv1.InterruptModeMessage) {
			t.Errorf("ir spec %+v", ks)
		}
		if res, err := repo.GetKernelSpecResource(t.Context(), "IR", "logo-64x64.png"); err != nil || string(res.Data) != string(logo) {
			t.Errorf("ir logo %q, %v", res.Data, err)
		}

		if err := os.RemoveAll(filepath.Join(dir, "Julia-1.10")); err != nil {
			t.Fatal(err)
		}
		if list, err = repo.ListKernelSpecs(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"ir", "python3"}, names(list)); d != "" {
			t.Errorf("answer after a removal (-want +got):\n%s", d)
		}
		if list[1].Spec.DisplayName != "The admin's" {
			t.Errorf("the admin's python3 was replaced: %+v", list[1].Spec)
		}

		writeHostSpec(t, dir, "ir", `{"argv":["R","{connection_file}"],"display_name":"R 4.4","language":"R"}`, map[string][]byte{})
		if ks, err = repo.GetKernelSpec(t.Context(), "ir"); err != nil || ks.Spec.DisplayName != "R 4.4" {
			t.Errorf("edited spec: %+v, %v", ks, err)
		}
	})

	t.Run("KernelNameIsTheNameInJupyterAPI", func(t *testing.T) {
		ns := testenv.Namespace(t, c)
		sample := adminSpec(ns, "sample-2", "Sample 2")
		sample.Spec.KernelName = "sample 2"
		for _, ks := range []*nbv1.KernelSpec{sample, adminSpec(ns, "python3", "Python 3")} {
			if err := c.Create(t.Context(), ks); err != nil {
				t.Fatal(err)
			}
		}
		repo := &repository.KernelSpecs{Reader: c, Namespace: ns}
		list, err := repo.ListKernelSpecs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"python3", "sample 2"}, names(list)); d != "" {
			t.Errorf("listed (-want +got):\n%s", d)
		}
		if ks, err := repo.GetKernelSpec(t.Context(), "Sample 2"); err != nil || ks.Name != "sample 2" || ks.Spec.DisplayName != "Sample 2" {
			t.Errorf("get Sample 2: %+v, %v", ks, err)
		}
		// The resource's name is not a Jupyter name of the spec.
		if _, err := repo.GetKernelSpec(t.Context(), "sample-2"); !errors.Is(err, domainerr.ErrNotFound) {
			t.Errorf("get sample-2: %v, want domainerr.ErrNotFound", err)
		}
	})

	t.Run("KernelNameAndCRDRefuseWhatJupyterCannotServe", func(t *testing.T) {
		ns := testenv.Namespace(t, c)
		for _, name := range []string{"a/b", "Upper", "..", "tab\there"} {
			ks := adminSpec(ns, "bad", "Bad")
			ks.Spec.KernelName = name
			if err := c.Create(t.Context(), ks); !apierrors.IsInvalid(err) {
				t.Errorf("kernelName %q: %v, want invalid", name, err)
			}
		}
	})

	t.Run("OfTwoSpecsWithOneNameTheOlderIsServed", func(t *testing.T) {
		ns := testenv.Namespace(t, c)
		older := adminSpec(ns, "z-older", "Older")
		older.Spec.KernelName = "shared"
		if err := c.Create(t.Context(), older); err != nil {
			t.Fatal(err)
		}
		// Creation times have whole seconds.
		time.Sleep(1100 * time.Millisecond)
		// A name taken case-insensitively, and by a spec whose name sorts first.
		newer := adminSpec(ns, "a-newer", "Newer")
		newer.Spec.KernelName = "shared"
		if err := c.Create(t.Context(), newer); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(t.Context(), adminSpec(ns, "other", "Other")); err != nil {
			t.Fatal(err)
		}
		repo := &repository.KernelSpecs{Reader: c, Namespace: ns}
		list, err := repo.ListKernelSpecs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"other", "shared"}, names(list)); d != "" || list[1].Spec.DisplayName != "Older" {
			t.Errorf("listed %+v (-want +got):\n%s", list, d)
		}
		if ks, err := repo.GetKernelSpec(t.Context(), "SHARED"); err != nil || ks.Spec.DisplayName != "Older" {
			t.Errorf("get shared: %+v, %v", ks, err)
		}
	})

	t.Run("FilesAreTheConfigMapsAndTheLogo", func(t *testing.T) {
		ns := testenv.Namespace(t, c)
		png := []byte("\x89PNG\r\n\x1a\n\x00\xff")
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "ir-files", Namespace: ns},
			Data: map[string]string{"kernel.js": "define([], {});", "kernel.css": "body {}", "logo-svg.svg": "<svg/>",
				"kernel.json": "{}", "README.md": "# ir"},
			BinaryData: map[string][]byte{"logo-64x64.png": png},
		}
		ir := adminSpec(ns, "ir", "R")
		ir.Spec.Files = &nbv1.KernelSpecFiles{ConfigMapName: cm.Name}
		ir.Spec.Logo = &nbv1.KernelLogo{FileName: "logo-32x32.png", Data: png}
		// A ConfigMap that does not exist is no files.
		gone := adminSpec(ns, "gone", "Gone")
		gone.Spec.Files = &nbv1.KernelSpecFiles{ConfigMapName: "nosuch"}
		for _, o := range []client.Object{cm, ir, gone} {
			if err := c.Create(t.Context(), o); err != nil {
				t.Fatal(err)
			}
		}
		repo := &repository.KernelSpecs{Reader: c, Namespace: ns}
		ks, err := repo.GetKernelSpec(t.Context(), "ir")
		if err != nil {
			t.Fatal(err)
		}
		// Jupyter Server lists kernel.js, kernel.css and the logos, and serves every file.
		want := map[string]string{"kernel.js": "kernel.js", "kernel.css": "kernel.css", "logo-svg": "logo-svg.svg",
			"logo-64x64": "logo-64x64.png", "logo-32x32": "logo-32x32.png"}
		if d := cmp.Diff(want, ks.Resources); d != "" {
			t.Errorf("resources (-want +got):\n%s", d)
		}
		files := map[string]string{"README.md": "# ir", "kernel.json": "{}", "kernel.js": "define([], {});",
			"logo-64x64.png": string(png), "logo-32x32.png": string(png)}
		for name, content := range files {
			if res, err := repo.GetKernelSpecResource(t.Context(), "IR", name); err != nil || string(res.Data) != content || res.FileName != name {
				t.Errorf("file %s: %q, %v", name, res.Data, err)
			}
		}
		for _, spec := range []struct{ name, file string }{{"ir", "missing"}, {"ir", ""}, {"ir", "../ir/kernel.js"}, {"ir", "sub/kernel.js"},
			{"gone", "kernel.js"}, {"nope", "kernel.js"}} {
			if _, err := repo.GetKernelSpecResource(t.Context(), spec.name, spec.file); !errors.Is(err, domainerr.ErrNotFound) {
				t.Errorf("file %q of %s: %v, want domainerr.ErrNotFound", spec.file, spec.name, err)
			}
		}
		if ks, err := repo.GetKernelSpec(t.Context(), "gone"); err != nil || len(ks.Resources) != 0 {
			t.Errorf("spec of a missing ConfigMap: %+v, %v", ks, err)
		}
	})

	t.Run("HostSpecsWithNamesResourcesCannotHaveAndTheirFiles", func(t *testing.T) {
		ns := testenv.Namespace(t, c)
		dir := t.TempDir()
		js := []byte("define([], {});")
		writeHostSpec(t, dir, "Sample 2", `{"argv":["x","{connection_file}"],"display_name":"Sample","language":"x"}`,
			map[string][]byte{"kernel.js": js, "notes.txt": []byte("notes")})
		repo := &repository.KernelSpecs{Namespace: ns, Host: &kernelspecs.Host{Client: c, Namespace: ns, Dirs: []string{dir}}}
		list, err := repo.ListKernelSpecs(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{"sample 2"}, names(list)); d != "" {
			t.Errorf("listed (-want +got):\n%s", d)
		}
		if d := cmp.Diff(map[string]string{"kernel.js": "kernel.js"}, list[0].Resources); d != "" {
			t.Errorf("resources (-want +got):\n%s", d)
		}
		for name, content := range map[string][]byte{"kernel.js": js, "notes.txt": []byte("notes")} {
			if res, err := repo.GetKernelSpecResource(t.Context(), "Sample 2", name); err != nil || string(res.Data) != string(content) {
				t.Errorf("file %s: %q, %v", name, res.Data, err)
			}
		}
	})

	t.Run("WithHostSpecsReadsUseTheReaderOnceASyncHasSettled", func(t *testing.T) {
		ns := testenv.Namespace(t, c)
		dir := t.TempDir()
		writeHostSpec(t, dir, "julia", `{"argv":["julia","{connection_file}"],"display_name":"Julia","language":"julia"}`, map[string][]byte{})
		host := &kernelspecs.Host{Client: c, Namespace: ns, Dirs: []string{dir}}
		// The Reader stands for the manager's cache; it counts the reads that reach it.
		cache := &countingReader{Reader: c}
		const settle = 100 * time.Millisecond
		repo := &repository.KernelSpecs{Reader: cache, Namespace: ns, Host: host, HostSettle: settle}

		if _, err := repo.GetKernelSpec(t.Context(), "julia"); err != nil || cache.reads.Load() != 0 {
			t.Fatalf("right after the sync: %v, %d reads of the cache, want none", err, cache.reads.Load())
		}
		time.Sleep(2 * settle)
		if _, err := repo.GetKernelSpec(t.Context(), "julia"); err != nil || cache.reads.Load() == 0 {
			t.Fatalf("once the sync settled: %v, %d reads of the cache, want some", err, cache.reads.Load())
		}
		// A spec installed now is found at once, though the cache is not asked.
		reads := cache.reads.Load()
		writeHostSpec(t, dir, "ir", `{"argv":["R","{connection_file}"],"display_name":"R","language":"R"}`, map[string][]byte{})
		list, err := repo.ListKernelSpecs(t.Context())
		if err != nil || cache.reads.Load() != reads {
			t.Fatalf("after an install: %v, %d reads of the cache, want still %d", err, cache.reads.Load(), reads)
		}
		if d := cmp.Diff([]string{"ir", "julia"}, names(list)); d != "" {
			t.Errorf("listed (-want +got):\n%s", d)
		}
	})
}

// countingReader counts the reads that reach its Reader.
type countingReader struct {
	client.Reader
	reads atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.reads.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.reads.Add(1)
	return r.Reader.List(ctx, list, opts...)
}
