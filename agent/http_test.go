package agent

import (
	"net/http"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/nbkube/nbkube/internal/agentapi"
)

func TestAgent_RefusesRequestsWithoutTheToken(t *testing.T) {
	ra := startAgent(t, nil)
	for _, path := range []string{agentapi.PathStatus, agentapi.PathChannels, agentapi.PathInterrupt} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ra.addr+path, nil)
		if path == agentapi.PathInterrupt {
			req.Method = http.MethodPost
		}
		req.Header.Set("Authorization", agentapi.AuthScheme+" wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s with a wrong token: %s", path, resp.Status)
		}
	}
	resp, err := http.Get("http://" + ra.addr + agentapi.PathReadyz)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("readyz: %v %v", resp, err)
	}
}

func TestAgent_ReadinessProbeWaitsForTheKernel(t *testing.T) {
	// A kernel that takes a second before it starts: the probe without ?wait fails at once,
	// with ?wait it answers 200 as soon as the kernel does, and a short wait still fails.
	argv := append([]string{"/bin/sh", "-c", `sleep 1; exec "$0" "$@"`}, ipykernel...)
	cfg, addr := testConfig(t, argv...)
	cfg.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	runAgent(t, cfg, addr)
	probe := func(query string) (int, time.Duration) {
		start := time.Now()
		resp, err := http.Get("http://" + addr + agentapi.PathReadyz + query)
		if err != nil {
			t.Fatalf("readyz%s: %v", query, err)
		}
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	if code, _ := probe(""); code != http.StatusServiceUnavailable {
		t.Errorf("readyz of a kernel not started yet: %d, want 503", code)
	}
	if code, took := probe("?wait=50ms"); code != http.StatusServiceUnavailable || took < 50*time.Millisecond {
		t.Errorf("readyz?wait=50ms of a kernel not started yet: %d after %s, want 503 after 50 ms", code, took)
	}
	code, took := probe("?wait=30s")
	if code != http.StatusOK {
		t.Errorf("readyz?wait=30s: %d, want 200 once the kernel answered", code)
	}
	if took < 300*time.Millisecond {
		t.Errorf("readyz?wait=30s answered after %s, before the kernel could have started", took)
	}
	// Ready: answered at once however long the probe may wait.
	if code, took := probe("?wait=30s"); code != http.StatusOK || took > time.Second {
		t.Errorf("readyz?wait=30s of a ready kernel: %d after %s", code, took)
	}
}
