package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeExecutable(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestAgentDir_BesideTheBinaryThenOnPATH(t *testing.T) {
	bin, onPath := t.TempDir(), t.TempDir()
	self := filepath.Join(bin, "nbkube")
	writeExecutable(t, self)
	writeExecutable(t, filepath.Join(onPath, "nbkube-agent"))
	t.Setenv("PATH", onPath)

	if dir, err := agentDir(self); err != nil || dir != onPath {
		t.Errorf("with the agent on PATH only: %q, %v; want %s", dir, err, onPath)
	}
	writeExecutable(t, filepath.Join(bin, "nbkube-agent"))
	if dir, err := agentDir(self); err != nil || dir != bin {
		t.Errorf("with the agent beside nbkube: %q, %v; want %s", dir, err, bin)
	}
}

func TestAgentDir_NoneSaysHowToGetIt(t *testing.T) {
	self := filepath.Join(t.TempDir(), "nbkube")
	writeExecutable(t, self)
	t.Setenv("PATH", t.TempDir())
	_, err := agentDir(self)
	if err == nil {
		t.Fatal("no agent anywhere, and no error")
	}
	for _, want := range []string{"nbkube-agent is neither beside " + self + " nor on PATH", "make build", "go install github.com/nbkube/nbkube/cmd/nbkube-agent@latest"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
