package repository

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The code that moves a claimed Python kernel reaches the directory, and sets the env, whatever
// their names and values hold, run by a real Python as the kernel would run it.
func TestWorkDirCode_MovesPythonIntoAnyDirectoryWithItsEnv(t *testing.T) {
	if code, movable := workDirCode("R", ".", nil); code != "" || !movable {
		t.Errorf("nothing to do in any language: %q, %v", code, movable)
	}
	for _, c := range []struct {
		dir string
		env map[string]string
	}{{"x", nil}, {".", map[string]string{"A": "1"}}} {
		if _, movable := workDirCode("R", c.dir, c.env); movable {
			t.Errorf("a kernel of R moved to %q with env %v", c.dir, c.env)
		}
	}
	base := t.TempDir()
	env := map[string]string{"KERNEL_USERNAME": "ann o'neil \"é\"\n", "OTHER": `back\slash`}
	for _, dir := range []string{".", "plain", "it's \"quoted\"", `back\slash`, "line\nbreak", "été/北京", "sep\u2028arator", "{braces} %s"} {
		if err := os.MkdirAll(filepath.Join(base, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		code, movable := workDirCode("python", dir, env)
		if !movable {
			t.Fatalf("%q: not movable", dir)
		}
		cmd := exec.Command("/usr/bin/python3", "-c", code+"\nimport os, sys\nsys.stdout.write(os.getcwd() + '\\0' + os.environ['KERNEL_USERNAME'] + '\\0' + os.environ['OTHER'] + '\\0' + repr(sorted(k for k in dir() if not k.startswith('__'))))")
		cmd.Dir = base
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v: %s", dir, err, out)
		}
		got := strings.Split(string(out), "\x00")
		if want := filepath.Join(base, dir); got[0] != want {
			t.Errorf("moved into %q, want %q", got[0], want)
		}
		if got[1] != env["KERNEL_USERNAME"] || got[2] != env["OTHER"] {
			t.Errorf("env %q, %q; want %q, %q", got[1], got[2], env["KERNEL_USERNAME"], env["OTHER"])
		}
		if got[3] != "['os', 'sys']" {
			t.Errorf("names left in the namespace: %s", got[3])
		}
	}
}
