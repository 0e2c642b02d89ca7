package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func parseAgentKeyFlag(t *testing.T, args ...string) *agentKeyFlag {
	t.Helper()
	fs := flag.NewFlagSet("apiserver", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := bindAgentKeyFlag(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// The API server and the manager read the same mounted key, as it is; one that is missing,
// unreadable or short stops the start, rather than serve with kernels' tokens it cannot
// derive.
func TestAgentKeyFlag_ReadsTheKeyFileAndRefusesShortOrMissingOnes(t *testing.T) {
	dir := t.TempDir()
	good, short := filepath.Join(dir, "good"), filepath.Join(dir, "short")
	key := []byte(strings.Repeat("k", 64))
	if err := os.WriteFile(good, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, key[:31], 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := parseAgentKeyFlag(t, "--agent-token-key-file="+good).read(); err != nil || !bytes.Equal(got, key) {
		t.Errorf("read() = %q, %v; want the file's bytes", got, err)
	}
	for _, args := range [][]string{nil, {"--agent-token-key-file=" + short}, {"--agent-token-key-file=" + filepath.Join(dir, "none")}} {
		if _, err := parseAgentKeyFlag(t, args...).read(); err == nil {
			t.Errorf("read() with %v took the key", args)
		}
	}
}

// A manager that serves the API itself must hold the key that separate API servers and the
// other replicas hold; one that serves no API may make its own for the run.
func TestAgentKeyFlag_ManagerMakesAKeyOnlyWithoutAnAPIServer(t *testing.T) {
	f := parseAgentKeyFlag(t)
	if _, err := f.managerKey(true); err == nil || !strings.Contains(err.Error(), "--agent-token-key-file") {
		t.Errorf("managerKey(with API server) = %v; want a refusal naming the flag", err)
	}
	k1, err := f.managerKey(false)
	if err != nil || len(k1) < 32 {
		t.Fatalf("managerKey(no API server) = %x, %v", k1, err)
	}
	if k2, _ := f.managerKey(false); bytes.Equal(k1, k2) {
		t.Error("two runs made the same key")
	}
}

// nbkube local keeps its key in its data directory, so that kernels started before a restart
// still answer the API server after it.
func TestReadOrMakeAgentKey_KeepsTheKeyAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "agent_token_key")
	k1, err := readOrMakeAgentKey(path)
	if err != nil || len(k1) < 32 {
		t.Fatalf("first start: %x, %v", k1, err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, %v", st, err)
	}
	k2, err := readOrMakeAgentKey(path)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Errorf("restart read %x, %v; want %x", k2, err, k1)
	}
}
