//go:build faults

// Package faults is the fault-injection suite of issue 24: each scenario runs real components
// (the nbkube binary, a real kube-apiserver and etcd, a real file system), injects a fault on
// purpose (kill -9, a full volume, hostile input) and asserts that nothing is lost. Each
// scenario logs its figure as one line, `figure: <scenario> key=value ...`, which
// docs/reliability.md quotes from the last run.
package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nbkube/nbkube/internal/testenv"
)

var (
	// binDir holds the nbkube binary that the process scenarios run.
	binDir   string
	build    sync.Once
	buildErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nbkube-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// nbkubeBinary builds cmd/nbkube once, for the scenarios that run it as a process. It is built
// on first use rather than in TestMain: `go test -fuzz` runs TestMain again in every fuzzing
// worker, which must not each link the whole binary.
func nbkubeBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "nbkube")
	build.Do(func() { buildErr = testenv.BuildCommands(binDir, "nbkube") })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}

// figure logs a scenario's figure in the one format docs/reliability.md quotes.
func figure(t *testing.T, scenario string, kv ...any) {
	t.Helper()
	s := "figure: " + scenario
	for i := 0; i+1 < len(kv); i += 2 {
		s += fmt.Sprintf(" %v=%v", kv[i], kv[i+1])
	}
	t.Log(s)
}
