package agent

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/testenv"
	"github.com/nbkube/nbkube/internal/wire"
)

// A kernel that has bound its ports but is still initialising gets one kernel_info_request,
// not one every few milliseconds: it would answer every request it found queued.
func TestAgent_AsksAKernelStillInitialisingForKernelInfoOnce(t *testing.T) {
	// IPython runs its startup files after the kernel bound its ports, before it reads them.
	ipythonDir := t.TempDir()
	startup := filepath.Join(ipythonDir, "profile_default", "startup")
	if err := os.MkdirAll(startup, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(startup, "slow.py"), []byte("import time\ntime.sleep(0.7)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("IPYTHONDIR", ipythonDir)
	var mu sync.Mutex
	var answered []string
	startAgent(t, func(c *Config) {
		c.Log = funcr.New(func(_, args string) {
			if strings.Contains(args, `"msg"="Kernel answered kernel_info"`) {
				mu.Lock()
				answered = append(answered, args)
				mu.Unlock()
			}
		}, funcr.Options{})
	})
	mu.Lock()
	defer mu.Unlock()
	if len(answered) != 1 || !strings.Contains(answered[0], `"requests"=1 `) {
		t.Errorf("kernel_info answers logged: %q; want one, after one request", answered)
	}
}

func TestAgent_InterruptStopsASleepingCell(t *testing.T) {
	for _, mode := range []string{"signal", "message"} {
		t.Run(mode, func(t *testing.T) {
			ra := startAgent(t, func(c *Config) { c.InterruptMode = mode })
			c := ra.connect(t, "s", false)
			id := c.sendExecute("import time; print('sleeping', flush=True); time.sleep(60)", false)
			// Interrupting before the cell runs would hit ipykernel between requests, where
			// it ignores SIGINT.
			c.waitOutput(id, "sleeping")
			if st := ra.status(t, ""); st.ExecutionState != agentapi.ExecutionBusy {
				t.Errorf("state while sleeping %q", st.ExecutionState)
			}
			start := time.Now()
			r := ra.interruptCell(t, c, id)
			if r.reply["status"] != "error" || r.reply["ename"] != "KeyboardInterrupt" {
				t.Errorf("reply %v", r.reply)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("interrupt took %s", took)
			}
			// The kernel goes on; an execute right after an interrupt may come back aborted
			// (zeromq-facts.md), so give it a second chance.
			for i := 0; ; i++ {
				r = c.execute("2+2")
				if r.reply["status"] != "aborted" || i == 1 {
					break
				}
			}
			if res := r.of("execute_result"); len(res) != 1 {
				t.Errorf("after the interrupt: %v", r.reply)
			}
		})
	}
}

func TestAgent_RestartKeepsClientsConnected(t *testing.T) {
	ra := startAgent(t, nil)
	c := ra.connect(t, "s", false)
	c.execute("x = 42")
	if resp := ra.request(t, http.MethodPost, agentapi.PathRestart); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("restart: %s", resp.Status)
	}
	sawRestarting := false
	for len(c.msgs) > 0 {
		m := <-c.msgs
		if h, _ := wire.ParseHeader(m.Header); h.MsgType == "status" && strings.Contains(string(m.Content), agentapi.ExecutionRestarting) {
			sawRestarting = true
		}
	}
	if !sawRestarting {
		t.Error("the client was not told of the restart")
	}
	r := c.execute("x")
	if r.reply["ename"] != "NameError" {
		t.Errorf("x survived the restart: %v", r.reply)
	}
	if st := ra.status(t, ""); st.RestartCount != 1 || st.ExecutionState != agentapi.ExecutionIdle || st.LastDeath != nil {
		t.Errorf("status after restart %+v (a restart asked for is no death)", st)
	}
}

func TestAgent_KernelThatDiesIsRestartedAndClientsAreTold(t *testing.T) {
	ra := startAgent(t, nil)
	c := ra.connect(t, "s", false)
	c.sendExecute("import os; os.kill(os.getpid(), 9)", false)
	testenv.Eventually(t, "the kernel to be restarted", 30*time.Second, func() error {
		if st := ra.status(t, ""); st.RestartCount != 1 || st.ExecutionState != agentapi.ExecutionIdle {
			return fmt.Errorf("restart count %d, execution state %s", st.RestartCount, st.ExecutionState)
		}
		return nil
	})
	if got := c.execute("1+1").of("execute_result"); len(got) != 1 {
		t.Error("the restarted kernel does not execute")
	}
	// The status says why the kernel restarted, for the Kernel's Restarted condition.
	if d := ra.status(t, "").LastDeath; d == nil || d.Signal != "SIGKILL" || d.ExitCode != 137 || d.Restart != 1 || time.Since(d.At) > time.Minute {
		t.Errorf("last death %+v, want SIGKILL, exit code 137, restart 1, just now", d)
	}
}

func TestAgent_ShutdownEndsRun(t *testing.T) {
	ra := startAgent(t, nil)
	start := time.Now()
	if resp := ra.request(t, http.MethodPost, agentapi.PathShutdown); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("shutdown: %s", resp.Status)
	}
	ra.waitEnded(t)
	t.Logf("shutdown took %s", time.Since(start))
}

func TestRun_KernelThatFailsToStartEndsWithItsExitCode(t *testing.T) {
	out := filepath.Join(t.TempDir(), "conn.json")
	cfg, _ := testConfig(t, "/bin/sh", "-c", `cp "$0" "$1"; echo "no such module" >&2; exit 3`, "{connection_file}", out)
	cfg.TerminationLog = filepath.Join(t.TempDir(), "termination-log")
	err := Run(context.Background(), cfg)
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 3 {
		t.Fatalf("Run = %v, want the kernel's exit code 3", err)
	}
	if msg, _ := os.ReadFile(cfg.TerminationLog); !strings.Contains(string(msg), "code 3") || !strings.Contains(string(msg), "no such module") {
		t.Errorf("termination message %q does not say why", msg)
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

func TestRun_KernelWithAnotherKeyIsNeverReady(t *testing.T) {
	// The kernel signs with a key the agent does not have: its messages are rejected (and
	// it rejects the agent's), so it never counts as started.
	cfg, _ := testConfig(t, "/bin/sh", "-c",
		`sed 's/"key": *"[^"]*"/"key": "another-key"/' "$0" > "$0.other" && exec /usr/bin/python3 -m ipykernel_launcher -f "$0.other"`,
		"{connection_file}")
	cfg.StartTimeout = 3 * time.Second
	err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "did not answer kernel_info") {
		t.Fatalf("Run = %v, want a start timeout", err)
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

func TestRun_StopsTheKernelOnCancel(t *testing.T) {
	ra := startAgent(t, nil)
	start := time.Now()
	ra.stop()
	ra.waitEnded(t)
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("stopping took %s", took)
	}
}

// A kernel that dies while starting because a port chosen for it was taken in between (kernels
// of nbkube local share the host's network) is started again with new ports.
func TestRun_KernelThatLosesAPortWhileStartingIsStartedAgain(t *testing.T) {
	// The first attempt dies as ipykernel does on "Address already in use"; later ones run.
	startedAgain(t, func(marker string) []string {
		return append([]string{"/bin/sh", "-c", `if [ ! -e "` + marker + `" ]; then touch "` + marker + `"; echo "zmq.error.ZMQError: Address already in use" >&2; exit 1; fi; exec "$0" "$@"`}, ipykernel...)
	})
}

// startedAgain runs an agent of the kernel command that argv makes of a marker file, which
// the command's first attempt creates and fails; the agent must start the kernel again, and
// the kernel then run code.
func startedAgain(t *testing.T, argv func(marker string) []string) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "first-attempt")
	cfg, addr := testConfig(t, argv(marker)...)
	ra := runAgent(t, cfg, addr)
	testenv.Eventually(t, "the kernel to be ready", 60*time.Second, func() error {
		select {
		case err := <-ra.done:
			ra.done <- err
			t.Fatalf("the agent ended: %v", err)
		default:
		}
		if st := ra.status(t, ""); !st.Ready {
			return fmt.Errorf("not ready: %+v", st)
		}
		return nil
	})
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the first attempt did not run: %v", err)
	}
	if r := ra.connect(t, "s", false).execute("print(6*7)"); r.reply["status"] != "ok" || r.streams() != "42\n" {
		t.Errorf("print(6*7): %v, streams %q", r.reply, r.streams())
	}
}

// foreignHeartbeat is a kernel wrapper whose first run lets another server take the kernel's
// heartbeat port before the kernel binds it: a server that accepts connections and hangs up,
// as a process that is no kernel would. ipykernel binds its heartbeat in a thread, which
// dies of it while the kernel lives on.
const foreignHeartbeat = `
import json, os, signal, socket, sys
marker, argv = sys.argv[1], sys.argv[2:]
if not os.path.exists(marker):
    open(marker, "w").close()
    conn = json.load(open(argv[argv.index("-f") + 1]))
    s = socket.socket()
    s.bind((conn["ip"], conn["hb_port"]))
    s.listen(16)
    if os.fork() == 0:
        signal.alarm(60)
        while True:
            c, _ = s.accept()
            c.close()
    s.close()
os.execv(argv[0], argv)
`

// A kernel whose heartbeat port another process took (it is alive, but the agent cannot
// connect to it) is started again with new ports, as one that died of a taken port is.
func TestRun_KernelWhoseHeartbeatPortWasTakenIsStartedAgain(t *testing.T) {
	startedAgain(t, func(marker string) []string {
		return append([]string{"/usr/bin/python3", "-c", foreignHeartbeat, marker}, ipykernel...)
	})
}

func TestExitCode_OfWhatARunReturned(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		report bool
	}{
		{nil, 0, false},
		{fmt.Errorf("run: %w", &ExitError{Code: 3}), 3, false},
		{fmt.Errorf("parse: %w", flag.ErrHelp), 2, false},
		{errors.New("no kernel"), 1, true},
	} {
		if code, report := ExitCode(tc.err); code != tc.code || report != tc.report {
			t.Errorf("ExitCode(%v) = %d, %v; want %d, %v", tc.err, code, report, tc.code, tc.report)
		}
	}
}
