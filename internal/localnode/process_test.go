package localnode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/utils/clock"

	"github.com/nbkube/nbkube/internal/testenv"
)

func startTestProcess(t *testing.T, script string) (*process, chan *process) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("sh: %v", err)
	}
	exited := make(chan *process, 1)
	logPath := filepath.Join(t.TempDir(), "logs", "c", "0.log")
	p, err := startProcess(processSpec{
		cmd:     hostCommand{path: sh, argv: []string{sh, "-c", script}, dir: t.TempDir()},
		env:     []string{"PATH=" + os.Getenv("PATH")},
		logPath: logPath,
	}, clock.RealClock{}, func(p *process) { exited <- p })
	if err != nil {
		t.Fatal(err)
	}
	return p, exited
}

// waitForFile waits until a test process signals readiness by creating a file.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	testenv.Eventually(t, path+" to appear", 10*time.Second, func() error {
		_, err := os.Stat(path)
		return err
	})
}

func TestProcess_ReportsExitCodeAndLogsOutput(t *testing.T) {
	defer goleak.VerifyNone(t)
	p, exited := startTestProcess(t, `echo to-stdout; echo to-stderr >&2; exit 7`)
	if got := <-exited; got != p {
		t.Fatal("onExit got another process")
	}
	if p.exitCode != 7 {
		t.Errorf("exit code = %d, want 7", p.exitCode)
	}
	if got := logTail(p.logPath); got != "to-stdout\nto-stderr" {
		t.Errorf("log = %q", got)
	}
}

func TestProcess_StopEscalatesToSIGKILLAndTakesTheWholeGroup(t *testing.T) {
	defer goleak.VerifyNone(t)
	// The shell ignores SIGTERM; the sleeps it runs do not.
	ready := filepath.Join(t.TempDir(), "ready")
	p, exited := startTestProcess(t, `trap '' TERM; touch `+ready+`; while :; do sleep 0.05; done`)
	waitForFile(t, ready)
	start := time.Now()
	p.stop(300*time.Millisecond, clock.RealClock{})
	<-exited
	if elapsed := time.Since(start); elapsed < 300*time.Millisecond {
		t.Errorf("stopped after %v, before the grace period", elapsed)
	}
	if p.exitCode != 128+int32(syscall.SIGKILL) {
		t.Errorf("exit code = %d, want %d", p.exitCode, 128+int32(syscall.SIGKILL))
	}
	if testenv.Alive(p.pid) {
		t.Errorf("process %d is still alive", p.pid)
	}
}

func TestProcess_GrandchildrenDieWithTheContainerProcess(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	p, exited := startTestProcess(t, `sleep 60 & echo $! > `+pidFile+`; exit 0`)
	<-exited
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the grandchild to die with its container process", 5*time.Second, func() error {
		if testenv.Alive(child) {
			return fmt.Errorf("grandchild %d outlived container process %d", child, p.pid)
		}
		return nil
	})
}

func TestLogTail_KeepsTheLast80LinesWithin2KiB(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 200 {
		b.WriteString(strconv.Itoa(i) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(logTail(path), "\n")
	if len(lines) != 80 || lines[0] != "120" || lines[79] != "199" {
		t.Errorf("tail has %d lines from %q to %q", len(lines), lines[0], lines[len(lines)-1])
	}
	long := strings.Repeat("x", 5000)
	if err := os.WriteFile(path, []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := logTail(path); len(got) != maxLogTailBytes {
		t.Errorf("tail of one long line has %d bytes, want %d", len(got), maxLogTailBytes)
	}
}

// TestProcess_DiesWhenNbkubeIsKilled re-runs the test binary as a stand-in for nbkube that
// starts a container process and prints its PID, kills it with SIGKILL (no chance to clean up),
// and expects the container process to die with it.
func TestProcess_DiesWhenNbkubeIsKilled(t *testing.T) {
	if os.Getenv("LOCALNODE_TEST_SPAWNER") == "1" {
		// sleep itself, not a shell around it: Pdeathsig reaches the direct child only.
		sleep, _ := exec.LookPath("sleep")
		p, err := startProcess(processSpec{
			cmd:     hostCommand{path: sleep, argv: []string{sleep, "300"}, dir: os.TempDir()},
			logPath: filepath.Join(os.Getenv("LOCALNODE_TEST_LOGDIR"), "0.log"),
		}, clock.RealClock{}, func(*process) {})
		if err != nil {
			panic(err)
		}
		println("pid", p.pid)
		select {}
	}
	spawner := exec.Command(os.Args[0], "-test.run=^TestProcess_DiesWhenNbkubeIsKilled$")
	spawner.Env = append(os.Environ(), "LOCALNODE_TEST_SPAWNER=1", "LOCALNODE_TEST_LOGDIR="+t.TempDir())
	out, err := spawner.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := spawner.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Fscanf(out, "pid %d\n", &pid); err != nil {
		_ = spawner.Process.Kill()
		_ = spawner.Wait()
		t.Fatalf("reading the container PID: %v", err)
	}
	if !testenv.Alive(pid) {
		t.Fatalf("container process %d is not running", pid)
	}
	t.Cleanup(func() {
		if testenv.Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	_ = spawner.Process.Kill()
	_ = spawner.Wait()
	testenv.Eventually(t, "the container process to die with nbkube", 5*time.Second, func() error {
		if testenv.Alive(pid) {
			return fmt.Errorf("container process %d outlived the killed nbkube", pid)
		}
		return nil
	})
}

func TestProcess_GetsOnlyTheEnvironmentItIsGiven(t *testing.T) {
	defer goleak.VerifyNone(t)
	t.Setenv("NBKUBE_TEST_HOST_SECRET", "must-not-leak")
	envCmd, err := exec.LookPath("env")
	if err != nil {
		t.Fatalf("env: %v", err)
	}
	for _, given := range [][]string{nil, {"ONLY=this"}} {
		exited := make(chan *process, 1)
		p, err := startProcess(processSpec{
			cmd:     hostCommand{path: envCmd, argv: []string{envCmd}, dir: t.TempDir()},
			env:     given,
			logPath: filepath.Join(t.TempDir(), "0.log"),
		}, clock.RealClock{}, func(p *process) { exited <- p })
		if err != nil {
			t.Fatal(err)
		}
		<-exited
		if got, want := logTail(p.logPath), strings.Join(given, "\n"); got != want {
			t.Errorf("given %q, the process saw this environment:\n%s", given, got)
		}
	}
}
