package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"

	"github.com/nbkube/nbkube/internal/agentapi"
)

// agentDir is the directory of the nbkube-agent that the kernel pods of `nbkube local` run:
// the one beside the nbkube binary self (`make build` puts both in bin/), else the first on
// PATH (`go install` puts each where it puts the other, but a copied nbkube stands alone).
// Without one every kernel would fail to start, so `nbkube local` refuses to, and says how to
// get one.
func agentDir(self string) (string, error) {
	beside := filepath.Join(filepath.Dir(self), agentapi.BinaryName)
	if st, err := os.Stat(beside); err == nil && !st.IsDir() && st.Mode().Perm()&0o111 != 0 {
		return filepath.Dir(self), nil
	}
	if p, err := exec.LookPath(agentapi.BinaryName); err == nil {
		if p, err = filepath.Abs(p); err == nil {
			return filepath.Dir(p), nil
		}
	}
	return "", fmt.Errorf("%s is neither beside %s nor on PATH, and kernels run it: "+
		"build both binaries with `make build` (bin/nbkube and bin/%[1]s), or install the agent with "+
		"`go install github.com/nbkube/nbkube/cmd/%[1]s@%[3]s`", agentapi.BinaryName, self, moduleVersion())
}

// moduleVersion is the version of the nbkube module this binary was built from when `go
// install` built it, else latest.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "latest"
}
