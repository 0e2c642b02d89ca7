package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// startServer starts cmd, a server the test runs beside `nbkube local` (nbkube's manager,
// Jupyter Server), with its output in a log file of the test, and returns a channel closed
// once the process has ended. When the test ends the server is sent stop (SIGKILL when nil;
// SIGKILL too if it is still there 15 s later) and, if the test failed, its log is shown.
func startServer(t testing.TB, name string, cmd *exec.Cmd, stop os.Signal) <-chan struct{} {
	t.Helper()
	logFile, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	if stop == nil {
		stop = os.Kill
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(stop)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		// The log is complete once the server has stopped.
		logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("%s log:\n%s", name, tail(log))
		}
	})
	return exited
}
