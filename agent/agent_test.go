package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func testConfig(t *testing.T, argv ...string) (Config, string) {
	t.Helper()
	secret := t.TempDir()
	if err := os.WriteFile(filepath.Join(secret, "key"), []byte("0123abcd\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return Config{KernelID: "k1", Listen: addr, SecretDir: secret, Argv: argv, RuntimeDir: t.TempDir(),
		StopGrace: 5 * time.Second, Log: logr.Discard()}, addr
}

func TestRun_WritesTheConnectionFileAndExitsAsTheKernel(t *testing.T) {
	out := filepath.Join(t.TempDir(), "conn.json")
	cfg, _ := testConfig(t, "/bin/sh", "-c", `cp "$0" "$1"; exit 3`, "{connection_file}", out)
	err := Run(context.Background(), cfg)
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 3 {
		t.Fatalf("Run = %v, want the kernel's exit code 3", err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var info ConnectionInfo
	if err := json.Unmarshal(data, &info); err != nil {
		t.Fatal(err)
	}
	ports := map[int]bool{info.ShellPort: true, info.IOPubPort: true, info.StdinPort: true, info.ControlPort: true, info.HBPort: true}
	if len(ports) != 5 || ports[0] {
		t.Errorf("ports not five distinct ones: %+v", info)
	}
	if info.Key != "0123abcd" || info.SignatureScheme != "hmac-sha256" || info.Transport != "tcp" || info.IP != "127.0.0.1" {
		t.Errorf("connection info %+v", info)
	}
	if entries, _ := os.ReadDir(cfg.RuntimeDir); len(entries) != 0 {
		t.Errorf("connection file left behind: %v", entries)
	}
}

func TestRun_ReadyOnceARealIPyKernelListensAndStopsOnCancel(t *testing.T) {
	cfg, addr := testConfig(t, "/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("agent ended before the kernel was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("kernel never ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if resp, err := http.Get("http://" + addr + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz %v %v", resp, err)
	}
	started := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not stop the kernel")
	}
	if took := time.Since(started); took > 4*time.Second {
		t.Errorf("stopping took %s: ipykernel ignored SIGTERM and waited for SIGKILL", took)
	}
}

func TestRun_RefusesAMissingKernelCommand(t *testing.T) {
	cfg, _ := testConfig(t, "/nonexistent/kernel")
	if err := Run(context.Background(), cfg); err == nil {
		t.Error("a kernel that cannot start was not reported")
	}
	cfg.Argv = nil
	if err := Run(context.Background(), cfg); err == nil {
		t.Error("empty argv accepted")
	}
}
