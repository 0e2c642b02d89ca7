package kernelspecs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"
)

func writeSpec(t *testing.T, dir, name, json string) {
	t.Helper()
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "kernel.json"), []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDirs_FollowJupyterOrder(t *testing.T) {
	env := map[string]string{"JUPYTER_PATH": "/a:/b", "HOME": "/home/u"}
	got := Dirs(func(k string) string { return env[k] })
	want := []string{"/a/kernels", "/b/kernels", "/home/u/.local/share/jupyter/kernels",
		"/usr/local/share/jupyter/kernels", "/usr/share/jupyter/kernels"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	env["JUPYTER_DATA_DIR"] = "/data"
	if got := Dirs(func(k string) string { return env[k] }); got[2] != "/data/kernels" {
		t.Errorf("JUPYTER_DATA_DIR ignored: %v", got)
	}
}

func TestFind_EarlierDirectoriesWinAndBadSpecsAreReported(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	writeSpec(t, first, "python3", `{"argv":["/opt/py","-f","{connection_file}"],"display_name":"Mine","language":"python","metadata":{"debugger":true}}`)
	writeSpec(t, second, "Python3", `{"argv":["/usr/bin/python3"],"display_name":"System","language":"python"}`)
	writeSpec(t, second, "ir", `{"argv":["R","{connection_file}"],"display_name":"R","language":"R","interrupt_mode":"message"}`)
	writeSpec(t, second, "broken", `{"argv":`)
	if err := os.WriteFile(filepath.Join(second, "ir", "logo-64x64.png"), []byte("\x89PNG\r\n\x1a\nrest"), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, errs := Find([]string{first, filepath.Join(first, "missing"), second})
	if len(errs) != 1 {
		t.Errorf("errors %v, want the broken spec only", errs)
	}
	got := map[string]string{}
	for _, s := range specs {
		got[s.Name] = s.JSON.DisplayName
	}
	if d := cmp.Diff(map[string]string{"python3": "Mine", "ir": "R"}, got); d != "" {
		t.Errorf("specs (-want +got):\n%s", d)
	}
	for _, s := range specs {
		ks, err := s.Resource("default")
		if err != nil {
			t.Fatal(err)
		}
		switch s.Name {
		case "ir":
			if ks.Spec.Files == nil || ks.Spec.Files.ConfigMapName != "ir" || ks.Spec.InterruptMode != "message" {
				t.Errorf("ir resource %+v", ks.Spec)
			}
			cm := s.FilesConfigMap(ks)
			if string(cm.BinaryData["logo-64x64.png"]) != "\x89PNG\r\n\x1a\nrest" || cm.Data["kernel.json"] == "" {
				t.Errorf("ir files: data %v, binaryData %v", cm.Data, cm.BinaryData)
			}
		case "python3":
			if ks.Spec.Metadata == nil || string(ks.Spec.Metadata.Raw) != `{"debugger":true}` || ks.Labels[LabelSource] != SourceHost {
				t.Errorf("python3 resource %+v", ks)
			}
		}
	}
}

func TestNames_KeepTheJupyterNameWhenItCannotBeAResourceName(t *testing.T) {
	for _, c := range []struct{ in, resource, kernelName string }{
		{in: "Python3", resource: "python3"},
		{in: "julia-1.10", resource: "julia-1.10"},
		{in: "sample 2", resource: "sample-2-76c7b704", kernelName: "sample 2"},
		{in: "Sample 2", resource: "sample-2-76c7b704", kernelName: "sample 2"},
		{in: "my_kernel", resource: "my-kernel-dc86feef", kernelName: "my_kernel"},
		{in: "a..b", resource: "a--b-f62b4241", kernelName: "a..b"},
		{in: "_é_", resource: "154aaa14", kernelName: "_é_"},
		{in: strings.Repeat("x", 254) + "_", resource: strings.Repeat("x", 230) + "-c3e17ee1", kernelName: strings.Repeat("x", 254) + "_"},
	} {
		resource, kernelName, err := Names(c.in)
		if err != nil || resource != c.resource || kernelName != c.kernelName {
			t.Errorf("Names(%q) = %q, %q, %v; want %q, %q", c.in, resource, kernelName, err, c.resource, c.kernelName)
		}
		if errs := validation.IsDNS1123Subdomain(resource); len(errs) > 0 {
			t.Errorf("Names(%q): resource name %q: %v", c.in, resource, errs)
		}
	}
	for _, bad := range []string{"", "..", "tab\there", strings.Repeat("x", 256)} {
		if r, k, err := Names(bad); err == nil {
			t.Errorf("Names(%q) = %q, %q; want an error", bad, r, k)
		}
	}
}

func TestPythonSpec_PicksTheFirstInterpreterWithIPyKernel(t *testing.T) {
	// /bin/true "succeeds" at anything, so use an interpreter that fails the import.
	spec, ok := PythonSpec(t.Context(), []string{"/nonexistent/python", "/bin/false", "/usr/bin/python3"})
	if !ok {
		t.Fatal("Debian's python3 with python3-ipykernel not found")
	}
	if spec.JSON.Argv[0] != "/usr/bin/python3" || spec.JSON.Argv[len(spec.JSON.Argv)-1] != "{connection_file}" {
		t.Errorf("argv %v", spec.JSON.Argv)
	}
	if _, ok := PythonSpec(t.Context(), []string{"/bin/false"}); ok {
		t.Error("an interpreter without ipykernel was taken")
	}
}
