package e2e

import (
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestJupyterLabServices_Contents runs JupyterLab's @jupyterlab/services client (test/js)
// against `nbkube local`: the contents API must work for a real client, unmodified.
func TestJupyterLabServices_Contents(t *testing.T) {
	jsDir, err := filepath.Abs("../js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(jsDir, "node_modules", "@jupyterlab", "services")); err != nil {
		t.Fatalf("@jupyterlab/services is not installed in %s (make test-deps installs it): %v", jsDir, err)
	}
	inst := startLocal(t, t.TempDir(), t.TempDir())
	u, err := url.Parse(inst.apiURL)
	if err != nil || inst.apiURL == "" {
		t.Fatalf("nbkube local printed no API URL: %q", inst.apiURL)
	}
	token := u.Query().Get("token")
	u.RawQuery = ""
	cmd := exec.Command("node", "--test", "contents.test.mjs")
	cmd.Dir = jsDir
	cmd.Env = append(os.Environ(), "NBKUBE_URL="+u.String(), "NBKUBE_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "# pass 1") {
		t.Fatalf("@jupyterlab/services contents test failed: %v\n%s", err, out)
	}
	inst.stop(t)
}
