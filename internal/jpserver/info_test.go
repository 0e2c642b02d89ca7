package jpserver

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// python is Debian's Python with Jupyter Server (hack/install-test-deps.sh installs it).
const python = "/usr/bin/python3"

func TestRuntimeDir_IsWhereJupyterCoreLooks(t *testing.T) {
	base := t.TempDir()
	realHome := filepath.Join(base, "real-home")
	if err := os.Mkdir(realHome, 0o755); err != nil {
		t.Fatal(err)
	}
	linkedHome := filepath.Join(base, "home")
	if err := os.Symlink(realHome, linkedHome); err != nil {
		t.Fatal(err)
	}
	for _, env := range []map[string]string{
		{"HOME": linkedHome},
		{"HOME": linkedHome, "XDG_DATA_HOME": "/xdg/data", "XDG_RUNTIME_DIR": "/run/user/1000"},
		{"HOME": linkedHome, "XDG_DATA_HOME": "/xdg/data", "JUPYTER_DATA_DIR": "/jupyter/data"},
		{"HOME": linkedHome, "JUPYTER_DATA_DIR": "/jupyter/data", "JUPYTER_RUNTIME_DIR": "/jupyter/runtime"},
	} {
		got, err := RuntimeDir(func(name string) string { return env[name] })
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(python, "-c", "from jupyter_core.paths import jupyter_runtime_dir; print(jupyter_runtime_dir())")
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("jupyter_core: %v", err)
		}
		if want := strings.TrimSpace(string(out)); got != want {
			t.Errorf("with %v: %s, jupyter_core says %s", env, got, want)
		}
	}
}

func TestWrite_JupyterServerListShowsTheServerUntilRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runtime")
	info := Info{URL: "http://127.0.0.1:8889/nb/", Hostname: "127.0.0.1", Port: 8889, BaseURL: "/nb/", Token: "secret",
		RootDir: "/srv/notebooks", PID: os.Getpid(), Version: "2.14.2"}
	path, err := Write(dir, info)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, FileName(os.Getpid())) {
		t.Errorf("written to %s", path)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		if st, err := os.Stat(p); err != nil || st.Mode() != want {
			t.Errorf("%s: %v, mode %v; want %v", p, err, st.Mode(), want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("runtime directory holds %d files, want the info file alone", len(entries))
	}

	listed := serverList(t, dir)
	if len(listed) != 1 {
		t.Fatalf("jupyter server list shows %d servers, want 1", len(listed))
	}
	if diff := cmp.Diff(info, listed[0]); diff != "" {
		t.Errorf("jupyter server list (-written +listed):\n%s", diff)
	}

	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if listed := serverList(t, dir); len(listed) != 0 {
		t.Errorf("after Remove, jupyter server list shows %v", listed)
	}
	if err := Remove(path); err != nil {
		t.Errorf("removing it again: %v", err)
	}
}

// serverList is what `jupyter server list --json` shows of the runtime directory dir.
func serverList(t *testing.T, dir string) []Info {
	t.Helper()
	cmd := exec.Command(python, "-m", "jupyter_server", "list", "--json")
	cmd.Env = append(os.Environ(), "JUPYTER_RUNTIME_DIR="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jupyter server list: %v", err)
	}
	var servers []Info
	for line := range bytes.Lines(out) {
		var s Info
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("jupyter server list: %v in %q", err, line)
		}
		servers = append(servers, s)
	}
	return servers
}
