package agent

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLinkClusterFile_ProfileAndDefaultSeeTheSecretsFile(t *testing.T) {
	dir := t.TempDir()
	ipython, secret := filepath.Join(dir, ".ipython"), filepath.Join(dir, "secret")
	if err := os.Mkdir(secret, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(secret, "ipcontroller-client.json")
	// The file may come later than the kernel: the links are made anyway.
	if err := linkClusterFile(ipython, "c1", file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(`{"v":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"profile_c1", "profile_default"} {
		b, err := os.ReadFile(filepath.Join(ipython, p, "security", "ipcontroller-client.json"))
		if err != nil || string(b) != `{"v":1}` {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	// The kubelet replaces a Secret's files: the links follow.
	if err := os.WriteFile(file, []byte(`{"v":2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ipython, "profile_c1", "security", "ipcontroller-client.json")); string(b) != `{"v":2}` {
		t.Errorf("after update %q", b)
	}
}

func TestLinkClusterFile_KeepsADefaultProfilesOwnFile(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, ".ipython", "profile_default", "security", "ipcontroller-client.json")
	if err := os.MkdirAll(filepath.Dir(own), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(own, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Linking twice (a second agent start in the same home) is fine too.
	for range 2 {
		if err := linkClusterFile(filepath.Join(dir, ".ipython"), "c1", filepath.Join(dir, "f")); err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(own); string(b) != "mine" {
		t.Errorf("default profile's file replaced: %q", b)
	}
	if target, err := os.Readlink(filepath.Join(dir, ".ipython", "profile_c1", "security", "ipcontroller-client.json")); err != nil || target != filepath.Join(dir, "f") {
		t.Errorf("profile link %q %v", target, err)
	}
}
