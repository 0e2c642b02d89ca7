package agent

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestProbeListening(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		l, err := net.Listen(network, map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network])
		if err != nil {
			t.Logf("%s: %v", network, err)
			continue
		}
		a := l.Addr().(*net.TCPAddr)
		addr, err := sockaddr(a.IP.String(), a.Port)
		if err != nil {
			t.Fatal(err)
		}
		if err := probeListening(addr); err != nil {
			t.Errorf("%s listening on %s: %v", network, a, err)
		}
		l.Close()
		if err := probeListening(addr); err == nil {
			t.Errorf("%s closed on %s: the probe says it listens", network, a)
		}
	}
	if _, err := sockaddr("localhost", 1); err == nil {
		t.Error("a host name is not an address")
	}
}

// The agent learns that a kernel is about to bind its ports from the kernel's read of its
// connection file; the watch ends with its context and leaves no goroutine behind.
func TestWatchOpen(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	path := filepath.Join(t.TempDir(), "kernel.json")
	if err := os.WriteFile(path, []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	read, err := watchOpen(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-read:
		t.Fatal("reported a read before anything opened the file")
	case <-time.After(50 * time.Millisecond):
	}
	if out, err := exec.Command("cat", path).CombinedOutput(); err != nil {
		t.Fatalf("cat: %v: %s", err, out)
	}
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("another process read the file; no report")
	}

	// Ended by its context, the watch reports nothing.
	ctx2, cancel2 := context.WithCancel(context.Background())
	read2, err := watchOpen(ctx2, path)
	if err != nil {
		t.Fatal(err)
	}
	cancel2()
	time.Sleep(20 * time.Millisecond)
	if out, err := exec.Command("cat", path).CombinedOutput(); err != nil {
		t.Fatalf("cat: %v: %s", err, out)
	}
	select {
	case <-read2:
		t.Error("a read was reported after the watch ended")
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := watchOpen(ctx, filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("watching a missing file: no error")
	}
}

// A run of quick stream messages arms the hint, batches further apart keep it, and a message
// of another kind ends it; a request's few prints, or a slow loop, never arm it.
func TestIncarnation_NoteOutput(t *testing.T) {
	inc := &incarnation{}
	now := time.Unix(1000, 0)
	step := func(msgType string, gap time.Duration) bool {
		now = now.Add(gap)
		inc.noteOutput(msgType, now)
		return inc.output.on()
	}
	// Round trips that print: busy, execute_input, stream, idle, quickly, again and again.
	for range 20 {
		for _, mt := range []string{"status", "execute_input", "stream", "status"} {
			if step(mt, time.Millisecond) {
				t.Fatalf("armed by a request's own output (%s)", mt)
			}
		}
	}
	// A slow loop: a line every 10 ms.
	for range 3 * outputRun {
		if step("stream", 10*time.Millisecond) {
			t.Fatal("armed by a line every 10 ms")
		}
	}
	// A fast loop, in the next request.
	step("status", time.Millisecond)
	for i := range outputRun {
		if armed := step("stream", time.Millisecond); armed != (i == outputRun-1) {
			t.Fatalf("after %d quick stream messages armed is %v", i+1, armed)
		}
	}
	// Moderated: batches 8 ms apart.
	for range 5 {
		if !step("stream", 2*moderation) {
			t.Fatal("a batch after the pause ended the stream")
		}
		for range 4 {
			step("stream", 0)
		}
	}
	if step("status", time.Millisecond) {
		t.Fatal("the idle status did not end the stream")
	}
	if step("stream", time.Millisecond) {
		t.Fatal("armed again by the first stream message after it")
	}
}
