package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/localnode"
	"github.com/nbkube/nbkube/internal/testenv"
)

// testForkServer runs a kernel fork server for the kernels of this test's agents, which
// inherit this process's environment: the server gets its interpreter settings, as a node's
// server has those of the node's pods. HOME is a directory of the test's (no user
// site-packages, as in a pod's home). idle is the server's idle time.
func testForkServer(t *testing.T, idle time.Duration, options ...func(*localnode.ForkServerOptions)) (socket, log string) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	env := serverEnv()
	// The socket's path must fit a Unix socket address: not under a long test name.
	dir, err := os.MkdirTemp("", "fork")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts := localnode.ForkServerOptions{Python: ipykernel[0], Dir: dir, Env: env, Idle: idle}
	for _, o := range options {
		o(&opts)
	}
	socket, done, err := localnode.ServeForkServer(ctx, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
		_ = os.RemoveAll(dir)
	})
	return socket, filepath.Join(dir, "forkserver.log")
}

// serverEnv is this process's interpreter settings, which the kernels of this test's agents
// inherit: a fork server started with them forks those kernels.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PYTHON") || strings.HasPrefix(name, "LC_") || name == "LANG" || name == "LANGUAGE" {
			env = append(env, kv)
		}
	}
	return env
}

// kernelFacts is what a kernel tells of its process.
type kernelFacts struct {
	PID, PPID, PGID int
	Parent          string
	Cwd, Path0      string
	Argv            []string
	Env             []string
	Home, Marker    string
	UserBase        string
	FrameEval       string
	Umask           int
	Random          float64
	Name            string
}

const factsCode = `import os, sys, json, random, site
m = os.umask(0); os.umask(m)
print(json.dumps({"PID": os.getpid(), "PPID": os.getppid(), "PGID": os.getpgid(0),
  "Parent": open("/proc/%d/cmdline" % os.getppid()).read().replace("\0", " "),
  "Cwd": os.getcwd(), "Path0": sys.path[0], "Argv": [sys.argv[0], sys.argv[1]], "Env": sorted(os.environ),
  "Home": os.environ.get("HOME"), "Marker": os.environ.get("FORK_TEST_MARKER"), "UserBase": site.USER_BASE,
  "FrameEval": os.environ.get("PYDEVD_USE_FRAME_EVAL"), "Umask": m, "Random": random.random(), "Name": __name__}))`

func (c *client) facts() kernelFacts {
	c.t.Helper()
	r := c.execute(factsCode)
	var f kernelFacts
	if err := json.Unmarshal([]byte(r.streams()), &f); err != nil {
		c.t.Fatalf("kernel facts %q: %v (reply %v)", r.streams(), err, r.reply)
	}
	return f
}

func forkedFrom(f kernelFacts) bool {
	return f.PPID != os.Getpid() && strings.Contains(f.Parent, "forkserver.py")
}

// A forked kernel is the process a new interpreter would have been: the same environment,
// working directory, path, arguments and user site, its own process group and random state.
func TestAgent_ForkedKernelIsWhatANewInterpreterWouldBe(t *testing.T) {
	socket, _ := testForkServer(t, time.Minute)
	t.Setenv("FORK_TEST_MARKER", "mark")
	work := t.TempDir()
	start := func(fork bool) kernelFacts {
		ra := startAgent(t, func(c *Config) {
			c.WorkDir = work
			if fork {
				c.ForkServer = socket
			}
		})
		return ra.connect(t, "s", false).facts()
	}
	plain, forked, forked2 := start(false), start(true), start(true)
	if forkedFrom(plain) || !forkedFrom(forked) || !forkedFrom(forked2) {
		t.Fatalf("parents: plain %d %q, forked %d %q and %d %q; want the agent's (%d) and the fork server twice",
			plain.PPID, plain.Parent, forked.PPID, forked.Parent, forked2.PPID, forked2.Parent, os.Getpid())
	}
	if forked.PPID != forked2.PPID {
		t.Errorf("two forked kernels have parents %d and %d, want the one fork server", forked.PPID, forked2.PPID)
	}
	for _, f := range []kernelFacts{plain, forked} {
		if f.PGID != f.PID {
			t.Errorf("kernel %d is in process group %d, want its own", f.PID, f.PGID)
		}
	}
	if forked.Random == forked2.Random {
		t.Errorf("two forked kernels drew the same random number %v", forked.Random)
	}
	for _, c := range []struct {
		what        string
		plain, fork any
	}{
		{"working directory", plain.Cwd, forked.Cwd},
		{"sys.path[0]", plain.Path0, forked.Path0},
		{"sys.argv[0]", plain.Argv[0], forked.Argv[0]},
		{"environment names", strings.Join(plain.Env, " "), strings.Join(forked.Env, " ")},
		{"HOME", plain.Home, forked.Home},
		{"FORK_TEST_MARKER", plain.Marker, forked.Marker},
		{"site.USER_BASE", plain.UserBase, forked.UserBase},
		{"PYDEVD_USE_FRAME_EVAL", plain.FrameEval, forked.FrameEval},
		{"umask", plain.Umask, forked.Umask},
		{"__name__", plain.Name, forked.Name},
	} {
		if c.plain != c.fork {
			t.Errorf("%s: new interpreter %v, forked %v", c.what, c.plain, c.fork)
		}
	}
	if forked.Cwd != work || forked.Marker != "mark" {
		t.Errorf("forked kernel runs in %q with FORK_TEST_MARKER %q, want %q and mark", forked.Cwd, forked.Marker, work)
	}
}

// Interrupts reach a forked kernel, its exit code is reported, and the kernel that replaces
// it is forked too.
func TestAgent_ForkedKernelInterruptsDiesAndIsForkedAgain(t *testing.T) {
	socket, _ := testForkServer(t, time.Minute)
	ra := startAgent(t, func(c *Config) { c.ForkServer = socket })
	c := ra.connect(t, "s", false)
	if f := c.facts(); !forkedFrom(f) {
		t.Fatalf("kernel's parent %q, want the fork server", f.Parent)
	}
	id := c.sendExecute("import time; print('sleeping', flush=True); time.sleep(60)", false)
	c.waitOutput(id, "sleeping")
	if r := ra.interruptCell(t, c, id); r.reply["ename"] != "KeyboardInterrupt" {
		t.Errorf("reply to the interrupted cell %v", r.reply)
	}
	// ipykernel aborts what reaches it in the moment after a cell that raised (the interrupt):
	// on a loaded machine the exit would be aborted, and the kernel never die.
	for i := 0; ; i++ {
		if r := c.execute("pass"); r.reply["status"] == "ok" {
			break
		} else if i == 20 {
			t.Fatalf("the kernel still aborts requests after the interrupt: %v", r.reply)
		}
	}
	c.sendExecute("import os; os._exit(3)", false)
	testenv.Eventually(t, "the kernel to be restarted", 30*time.Second, func() error {
		if st := ra.status(t, ""); st.RestartCount != 1 || st.ExecutionState != agentapi.ExecutionIdle {
			return errors.New("not restarted yet")
		}
		return nil
	})
	if d := ra.status(t, "").LastDeath; d == nil || d.ExitCode != 3 || d.Signal != "" {
		t.Errorf("last death %+v, want exit code 3", d)
	}
	if f := c.facts(); !forkedFrom(f) {
		t.Errorf("the restarted kernel's parent is %q, want the fork server", f.Parent)
	}
}

// A kernel whose interpreter would start otherwise than the fork server's is started as a
// new process; one whose agent hangs up is killed; and a server that exited when idle is
// started again by the next kernel.
func TestForkServer_RefusesHangsUpAndComesBack(t *testing.T) {
	socket, _ := testForkServer(t, time.Minute)

	t.Run("other interpreter settings", func(t *testing.T) {
		t.Setenv("PYTHONHASHSEED", "7")
		ra := startAgent(t, func(c *Config) { c.ForkServer = socket })
		if f := ra.connect(t, "s", false).facts(); forkedFrom(f) {
			t.Errorf("a kernel with PYTHONHASHSEED set was forked from %q", f.Parent)
		}
	})

	t.Run("a server that cannot start", func(t *testing.T) {
		dir, err := os.MkdirTemp("", "fork")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithCancel(context.Background())
		broken, done, err := localnode.ServeForkServer(ctx, localnode.ForkServerOptions{Python: "/bin/false", Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); <-done }()
		for range 2 { // the connection that starts it, then one after it was given up
			began := time.Now()
			ra := startAgent(t, func(c *Config) { c.ForkServer = broken })
			// Not after forkTimeout: the broken server is given up, its connections closed.
			if took := time.Since(began); took > forkTimeout/2 {
				t.Errorf("the kernel took %s to start beside a server that cannot start", took)
			}
			if f := ra.connect(t, "s", false).facts(); forkedFrom(f) || f.PPID != os.Getpid() {
				t.Errorf("kernel's parent %q, want the agent", f.Parent)
			}
			ra.stop()
			ra.waitEnded(t)
		}
	})

	t.Run("a data directory too long for a socket address", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
		ctx, cancel := context.WithCancel(context.Background())
		long, done, err := localnode.ServeForkServer(ctx, localnode.ForkServerOptions{Python: ipykernel[0], Dir: dir, Env: serverEnv()})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		ra := startAgent(t, func(c *Config) { c.ForkServer = long })
		if f := ra.connect(t, "s", false).facts(); !forkedFrom(f) {
			t.Errorf("kernel's parent %q, want the fork server", f.Parent)
		}
		ra.stop()
		ra.waitEnded(t)
		cancel()
		<-done
		if _, err := os.Stat(filepath.Dir(long)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the socket's directory %s is left behind (%v)", filepath.Dir(long), err)
		}
	})

	t.Run("agent hangs up", func(t *testing.T) {
		dir := t.TempDir()
		info, err := newConnectionInfo("127.0.0.1", "k", "k1")
		if err != nil {
			t.Fatal(err)
		}
		conn := filepath.Join(dir, "k.json")
		if err := info.write(conn); err != nil {
			t.Fatal(err)
		}
		argv := append([]string{}, ipykernel...)
		argv[len(argv)-1] = conn
		k, err := forkKernel(socket, argv, kernelEnv(os.Environ()), dir, os.Stdout, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(k.pid, 0); err != nil {
			t.Fatalf("forked kernel %d: %v", k.pid, err)
		}
		k.conn.Close()
		testenv.Eventually(t, "the kernel of an agent that hung up to end", 10*time.Second, func() error {
			if err := syscall.Kill(k.pid, 0); !errors.Is(err, syscall.ESRCH) {
				return errors.New("still there")
			}
			return nil
		})
	})

	t.Run("started again after idling out", func(t *testing.T) {
		socket, log := testForkServer(t, time.Second)
		ra := startAgent(t, func(c *Config) { c.ForkServer = socket })
		if f := ra.connect(t, "s", false).facts(); !forkedFrom(f) {
			t.Fatalf("a kernel's parent is %q, want the fork server", f.Parent)
		}
		ra.stop()
		ra.waitEnded(t)
		testenv.Eventually(t, "the idle fork server to exit", 30*time.Second, func() error {
			b, _ := os.ReadFile(log)
			if !strings.Contains(string(b), "idle, exiting") {
				return errors.New("not yet")
			}
			return nil
		})
		ra = startAgent(t, func(c *Config) { c.ForkServer = socket })
		if f := ra.connect(t, "s", false).facts(); !forkedFrom(f) {
			t.Errorf("after the server idled out, a kernel's parent is %q, want the fork server", f.Parent)
		}
	})
}

// A node that sandboxes every pod has a fork server that forks kernels into sandboxes only: a
// request from the host's namespaces gets no kernel there (the agent starts its own), as it
// could only come through a sandbox's connection whose process ended and whose PID the host
// gave to another process.
func TestForkServer_ForSandboxesOnlyForksNoKernelOnTheHost(t *testing.T) {
	socket, log := testForkServer(t, time.Minute, func(o *localnode.ForkServerOptions) { o.SandboxedOnly = true })
	ra := startAgent(t, func(c *Config) { c.ForkServer = socket })
	if f := ra.connect(t, "s", false).facts(); forkedFrom(f) || f.PPID != os.Getpid() {
		t.Errorf("kernel's parent %q, want the agent", f.Parent)
	}
	if b, _ := os.ReadFile(log); strings.Contains(string(b), "Traceback") {
		t.Errorf("the fork server failed:\n%s", b)
	}
}

// The fork server finds an agent's sandbox through the process that connected, never through
// its PID alone: a PID whose process ended since names nothing, even once another process has
// it (here this test's interpreter stands for that process).
func TestForkServer_APIDTakenByAnotherProcessNamesNoSandbox(t *testing.T) {
	_, log := testForkServer(t, time.Minute)
	script := filepath.Join(filepath.Dir(log), "forkserver.py")
	check := `
import importlib.util, os, subprocess, sys
spec = importlib.util.spec_from_file_location("forkserver", sys.argv[1])
fs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fs)
gone = subprocess.Popen(["sleep", "60"])
pidfd = os.pidfd_open(gone.pid)
gone.kill()
gone.wait()
try:
    fs.peer_namespaces(os.getpid(), pidfd)
    print("resolved")
except OSError as e:
    print("refused:", e)
live = subprocess.Popen(["sleep", "60"])
print("live:", fs.peer_namespaces(live.pid, os.pidfd_open(live.pid)))
live.kill()
`
	out, err := exec.Command(ipykernel[0], "-c", check, script).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "refused: the process that connected has ended") || !strings.Contains(string(out), "live: []") {
		t.Errorf("peer_namespaces: %s", out)
	}
}

// Only ipykernel's command is asked for: another kernel's start must not make the node start
// a server that imports ipykernel.
func TestForkKernel_AsksOnlyForIPyKernel(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.sock")
	for _, argv := range [][]string{{"R", "--slave", "-e", "IRkernel::main()", "{connection_file}"}, {"python3", "-c", "pass"}} {
		if _, err := forkKernel(missing, argv, nil, "", os.Stdout, io.Discard); !errors.Is(err, errNotIPyKernel) {
			t.Errorf("%v: %v, want a refusal without asking", argv, err)
		}
	}
	if _, err := forkKernel(missing, ipykernel, nil, "", os.Stdout, io.Discard); errors.Is(err, errNotForked) || err == nil {
		t.Errorf("ipykernel's command: %v, want the failure to reach the server", err)
	}
}

// A forked kernel ends as a new interpreter does: its exit handlers run (IPython saves its
// history in one, notebooks register their own).
func TestAgent_ForkedKernelRunsItsExitHandlers(t *testing.T) {
	socket, _ := testForkServer(t, time.Minute)
	// The kernel's own exit, however slow on a busy machine: a shutdown that cuts it short
	// (ExitAfterReply's default) skips the handlers of forked and new interpreters alike.
	ra := startAgent(t, func(c *Config) { c.ForkServer, c.ExitAfterReply = socket, 30*time.Second })
	c := ra.connect(t, "s", false)
	if f := c.facts(); !forkedFrom(f) {
		t.Fatalf("kernel's parent %q, want the fork server", f.Parent)
	}
	bye := filepath.Join(t.TempDir(), "bye")
	if r := c.execute("import atexit; atexit.register(lambda: open(" + strconv.Quote(bye) + ", 'w').write('bye'))"); r.reply["status"] != "ok" {
		t.Fatalf("register: %v", r.reply)
	}
	if resp := ra.request(t, http.MethodPost, agentapi.PathShutdown); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("shutdown: %s", resp.Status)
	}
	ra.waitEnded(t)
	if b, err := os.ReadFile(bye); string(b) != "bye" {
		t.Errorf("the kernel's exit handler wrote %q (%v), want bye", b, err)
	}
}
