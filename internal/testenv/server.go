package testenv

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a program a test runs as a server (Hydra, JupyterHub, Jupyter Server): in a
// process group of its own, so that the processes it starts go with it, with its output in
// a file.
type Server struct {
	logPath string
	exited  chan struct{}
	waitErr error
	stop    func()
}

// StartServer starts cmd for the test with its standard output and error in a new file at
// logPath. Stop, or the end of the test, sends its process group SIGTERM, then SIGKILL after
// grace; a test that failed shows its output, named name.
func StartServer(t testing.TB, name string, cmd *exec.Cmd, logPath string, grace time.Duration) *Server {
	t.Helper()
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	s := &Server{logPath: logPath, exited: make(chan struct{})}
	go func() { s.waitErr = cmd.Wait(); close(s.exited) }()
	s.stop = sync.OnceFunc(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(grace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
		_ = log.Close()
	})
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("%s's output:\n%s", name, s.Log())
		}
	})
	return s
}

// Stop stops the server before the test ends; it may be called again.
func (s *Server) Stop() { s.stop() }

// Exited is closed once the server has exited; ExitErr then says how.
func (s *Server) Exited() <-chan struct{} { return s.exited }

// ExitErr is the server's exit error, once Exited is closed.
func (s *Server) ExitErr() error {
	<-s.exited
	return s.waitErr
}

// Log is the server's output so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}
