package repository

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The code that moves a claimed Python kernel reaches the directory whatever its name holds,
// run by a real Python as the kernel would run it.
func TestWorkDirCode_MovesPythonIntoAnyDirectory(t *testing.T) {
	if workDirCode("R", "x") != "" {
		t.Error("code for a language nbkube cannot move")
	}
	base := t.TempDir()
	for _, dir := range []string{"plain", "it's \"quoted\"", `back\slash`, "line\nbreak", "été/北京", "sep\u2028arator", "{braces} %s"} {
		if err := os.MkdirAll(filepath.Join(base, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/usr/bin/python3", "-c", workDirCode("python", dir)+"\nimport os, sys; sys.stdout.write(os.getcwd())")
		cmd.Dir = base
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v: %s", dir, err, out)
		}
		if got := strings.TrimPrefix(string(out), base+"/"); got != dir {
			t.Errorf("moved into %q, want %q", got, dir)
		}
	}
}
