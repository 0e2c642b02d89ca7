package ipcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nbkube/nbkube/internal/testenv"
)

const python = "/usr/bin/python3"

func needIPyParallel(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import ipyparallel").Run(); err != nil {
		t.Skipf("%s cannot import ipyparallel (apt-get install python3-ipyparallel): %v", python, err)
	}
}

// start runs python with args in a process group of its own, killed when the test ends, and
// returns its pid (the group's id).
func start(t *testing.T, home string, args ...string) int {
	t.Helper()
	// Output goes to a file: exec would copy it into a buffer with goroutines of its own,
	// which the leak checks would count.
	out, err := os.CreateTemp(t.TempDir(), "output")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "IPYTHONDIR="+filepath.Join(home, ".ipython"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("%v:\n%s", args, b)
		}
		_ = out.Close()
	})
	return cmd.Process.Pid
}

// cluster is a real ipcontroller on files made by EngineFile and ClientFile.
type cluster struct {
	ip, key, dir, clientFile, engineFile string
	pid                                  int
}

func startController(t *testing.T) cluster {
	t.Helper()
	// A loopback address of its own, so that test runs side by side do not share ports.
	c := cluster{ip: fmt.Sprintf("127.0.%d.%d", 77+rand.IntN(100), 2+rand.IntN(250)), key: randomID() + randomID(), dir: t.TempDir()}
	security := filepath.Join(c.dir, "profile", "security")
	if err := os.MkdirAll(security, 0o700); err != nil {
		t.Fatal(err)
	}
	c.engineFile, c.clientFile = filepath.Join(security, "ipcontroller-engine.json"), filepath.Join(security, "ipcontroller-client.json")
	conn := Connection{Key: c.key, Interface: "tcp://" + c.ip, Location: c.ip}
	written := map[string][]byte{}
	for path, build := range map[string]func(Connection) ([]byte, error){c.engineFile: EngineFile, c.clientFile: ClientFile} {
		b, err := build(conn)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		written[path] = b
	}
	// No --ports: ipcontroller's internal ports stay random (docs/ipyparallel.md §2).
	began := time.Now()
	c.pid = start(t, c.dir, "-m", "ipyparallel.controller", "--reuse", "--ip="+c.ip, "--profile-dir="+filepath.Join(c.dir, "profile"))
	testenv.Eventually(t, "the hub answers", 30*time.Second, func() error {
		_, err := QueryHub(t.Context(), c.addr(), []byte(c.key))
		return err
	})
	t.Logf("the hub answered %s after ipcontroller started", time.Since(began).Round(time.Millisecond))
	// With --reuse, ipcontroller takes the files as they are: had it failed to load them, it
	// would have written new ones with other ports and another key.
	for path, b := range written {
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s was rewritten (%v):\n%s", path, err, got)
		}
	}
	return c
}

func (c cluster) addr() string { return net.JoinHostPort(c.ip, strconv.Itoa(RegistrationPort)) }

func (c cluster) startEngine(t *testing.T, ident string) int {
	t.Helper()
	profile := filepath.Join(t.TempDir(), "engine-profile")
	if err := os.Mkdir(profile, 0o700); err != nil {
		t.Fatal(err)
	}
	return start(t, c.dir, "-m", "ipyparallel.engine", "--file="+c.engineFile, "--ident="+ident, "--profile-dir="+profile, "--timeout=30")
}

// leakCheck returns a check that no goroutine started since is left. Tests run it while the
// hub is still up, so that a goroutine blocked on the hub would show.
func leakCheck(t *testing.T) func() {
	opt := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		goleak.VerifyNone(t, opt)
	}
}

// byUUID returns the engines of st by UUID.
func byUUID(st HubStatus) map[string]Engine {
	m := map[string]Engine{}
	for _, e := range st.Engines {
		m[e.UUID] = e
	}
	return m
}

func TestQueryHub_ReportsEnginesByIdentTheirLoadAndOnlyThoseRegistered(t *testing.T) {
	needIPyParallel(t)
	c := startController(t)
	noLeaks := leakCheck(t)
	began := time.Now()
	pidA := c.startEngine(t, "engine-a")
	c.startEngine(t, "engine-b")

	var st HubStatus
	testenv.Eventually(t, "both engines registered", 60*time.Second, func() error {
		var err error
		if st, err = QueryHub(t.Context(), c.addr(), []byte(c.key)); err != nil {
			return err
		}
		if len(st.Engines) != 2 {
			return fmt.Errorf("engines %+v", st.Engines)
		}
		return nil
	})
	t.Logf("both engines registered %s after they started", time.Since(began).Round(time.Millisecond))
	began = time.Now()
	const calls = 20
	for range calls {
		if _, err := QueryHub(t.Context(), c.addr(), []byte(c.key)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("QueryHub took %s on average", (time.Since(began) / calls).Round(time.Microsecond))

	engines := byUUID(st)
	a, okA := engines["engine-a"]
	b, okB := engines["engine-b"]
	if !okA || !okB || a.ID == b.ID {
		t.Fatalf("engines %+v, want the idents engine-a and engine-b as UUIDs", st.Engines)
	}
	if st.Engines[0].ID > st.Engines[1].ID {
		t.Errorf("engines %+v not by ID", st.Engines)
	}
	for _, e := range st.Engines {
		if e.Queue+e.Tasks+e.Completed != 0 {
			t.Errorf("engine %+v has work before any task", e)
		}
	}

	// A real client keeps engine-b busy for a while.
	client := fmt.Sprintf(`import ipyparallel as ipp, time
rc = ipp.Client(%q, timeout=30)
rc[%d].apply_async(time.sleep, 5).get(timeout=60)
`, c.clientFile, b.ID)
	start(t, c.dir, "-c", client)
	testenv.Eventually(t, "engine-b busy, engine-a idle", 30*time.Second, func() error {
		st, err := QueryHub(t.Context(), c.addr(), []byte(c.key))
		if err != nil {
			return err
		}
		if e := byUUID(st); e["engine-b"].Queue+e["engine-b"].Tasks == 0 || e["engine-a"] != a {
			return fmt.Errorf("engines %+v", st.Engines)
		}
		return nil
	})
	testenv.Eventually(t, "the task completed", 30*time.Second, func() error {
		st, err := QueryHub(t.Context(), c.addr(), []byte(c.key))
		if err != nil {
			return err
		}
		if e := byUUID(st); e["engine-b"] != (Engine{ID: b.ID, UUID: "engine-b", Completed: 1}) || e["engine-a"] != a {
			return fmt.Errorf("engines %+v", st.Engines)
		}
		return nil
	})

	// The hub keeps the queue of an engine that left in its queue_reply; QueryHub does not
	// report it.
	if err := syscall.Kill(pidA, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "engine-a gone", 30*time.Second, func() error {
		st, err := QueryHub(t.Context(), c.addr(), []byte(c.key))
		if err != nil {
			return err
		}
		if len(st.Engines) != 1 || st.Engines[0].UUID != "engine-b" {
			return fmt.Errorf("engines %+v", st.Engines)
		}
		return nil
	})
	noLeaks()
}

func TestQueryHub_ErrorsEndWithinTheContext(t *testing.T) {
	needIPyParallel(t)
	c := startController(t)
	noLeaks := leakCheck(t)

	t.Run("the hub's own errors", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		q, err := dialHub(ctx, c.addr(), []byte(c.key))
		if err != nil {
			t.Fatal(err)
		}
		defer q.close()
		// The hub answers these with hub_error, which carries the Python exception.
		for _, req := range []struct{ msgType, content, want string }{
			{msgType: "engine_count_request", content: `{}`, want: "KeyError: \"Bad Message Type"},
			{msgType: "queue_request", content: `{"targets":[99],"verbose":false}`, want: "IndexError: No Such Engine"},
		} {
			_, err := q.ask(ctx, req.msgType, req.content, "queue_reply")
			if !errors.Is(err, ErrHub) || !strings.Contains(err.Error(), "hub_error") || !strings.Contains(err.Error(), req.want) {
				t.Errorf("%s: %v, want a hub_error %s", req.msgType, err, req.want)
			}
		}
	})
	noLeaks()

	within := func(t *testing.T, addr, key string, timeout, limit time.Duration) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), timeout)
		defer cancel()
		began := time.Now()
		st, err := QueryHub(ctx, addr, []byte(key))
		if err == nil {
			t.Fatalf("answered %+v", st)
		}
		if d := time.Since(began); d > limit {
			t.Errorf("took %s, more than %s: %v", d, limit, err)
		}
		noLeaks()
		return err
	}
	t.Run("wrong key", func(t *testing.T) {
		// ipyparallel 7.1's hub means to answer a badly signed request with hub_error but
		// fails to (its log: "list indices must be integers"): only the context ends the wait.
		if err := within(t, c.addr(), "not-the-key", time.Second, 1500*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%v, want the context's deadline", err)
		}
	})
	t.Run("closed port", func(t *testing.T) {
		err := within(t, net.JoinHostPort(c.ip, strconv.Itoa(RegistrationPort-1)), c.key, 5*time.Second, time.Second)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%v, want connection refused", err)
		}
	})
	t.Run("frozen hub", func(t *testing.T) {
		// Its listening socket still accepts, but nothing answers, not even the greeting.
		if err := syscall.Kill(-c.pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = syscall.Kill(-c.pid, syscall.SIGCONT) }()
		if err := within(t, c.addr(), c.key, time.Second, 1500*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%v, want the context's deadline", err)
		}
	})
}

// hostilePeer listens on a free loopback port and sends each connection a ZMTP greeting and
// handshake as a ROUTER, then stream.
func hostilePeer(t *testing.T, stream []byte) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write(append(append(zmtpGreeting(), zmtpReady()...), stream...))
			_, _ = io.Copy(io.Discard, c) // until the caller hangs up
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

func TestQueryHub_RefusesAFrameBeyondItsBudget(t *testing.T) {
	addr := hostilePeer(t, zmtpLongFrameHeader(0, 1<<40))
	noLeaks := leakCheck(t)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	began := time.Now()
	_, err := QueryHub(ctx, addr, []byte("key"))
	if !errors.Is(err, ErrHub) || !strings.Contains(err.Error(), "budget") {
		t.Errorf("%v, want the frame refused", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("took %s", d)
	}
	noLeaks()
}
