package ipcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

const python = "/usr/bin/python3"

func needIPyParallel(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import ipyparallel").Run(); err != nil {
		t.Skipf("%s cannot import ipyparallel (apt-get install python3-ipyparallel): %v", python, err)
	}
}

// start runs a Python module in a process group of its own, killed when the test ends.
func start(t *testing.T, home string, args ...string) {
	t.Helper()
	cmd := exec.Command(python, args...)
	cmd.Env = append(os.Environ(), "HOME="+home, "IPYTHONDIR="+filepath.Join(home, ".ipython"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%v:\n%s", args, out.String())
		}
	})
}

// cluster is a real ipcontroller on files made by EngineFile and ClientFile.
type cluster struct {
	ip, key, dir, clientFile, engineFile string
}

func startController(t *testing.T) cluster {
	t.Helper()
	c := cluster{ip: fmt.Sprintf("127.0.%d.%d", 77+rand.IntN(100), 2+rand.IntN(250)), key: randomID() + randomID(), dir: t.TempDir()}
	profile := filepath.Join(c.dir, "profile")
	security := filepath.Join(profile, "security")
	if err := os.MkdirAll(security, 0o700); err != nil {
		t.Fatal(err)
	}
	conn := Connection{Key: c.key, Interface: "tcp://" + c.ip, Location: c.ip}
	files := map[string]func(Connection) ([]byte, error){"ipcontroller-engine.json": EngineFile, "ipcontroller-client.json": ClientFile}
	written := map[string][]byte{}
	for name, make := range files {
		b, err := make(conn)
		if err != nil {
			t.Fatal(err)
		}
		written[name] = b
		if err := os.WriteFile(filepath.Join(security, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c.engineFile, c.clientFile = filepath.Join(security, "ipcontroller-engine.json"), filepath.Join(security, "ipcontroller-client.json")
	// No --ports: ipcontroller's internal ports stay random (docs/ipyparallel.md §2).
	start(t, c.dir, "-m", "ipyparallel.controller", "--reuse", "--ip="+c.ip, "--profile-dir="+profile)
	eventually(t, 30*time.Second, "the hub answers", func() error {
		_, err := QueryHub(t.Context(), net.JoinHostPort(c.ip, strconv.Itoa(RegistrationPort)), []byte(c.key))
		return err
	})
	// --reuse takes the files as they are and never rewrites them.
	for name, b := range written {
		if got, err := os.ReadFile(filepath.Join(security, name)); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s was rewritten (%v):\n%s", name, err, got)
		}
	}
	return c
}

func (c cluster) addr() string { return net.JoinHostPort(c.ip, strconv.Itoa(RegistrationPort)) }

func (c cluster) startEngine(t *testing.T, ident string) {
	t.Helper()
	profile := filepath.Join(t.TempDir(), "engine-profile")
	if err := os.Mkdir(profile, 0o700); err != nil {
		t.Fatal(err)
	}
	start(t, c.dir, "-m", "ipyparallel.engine", "--file="+c.engineFile, "--ident="+ident, "--profile-dir="+profile, "--timeout=30")
}

// noLeaks checks, after the test's processes are gone (cleanups run last first), that no
// goroutine of QueryHub is left.
func noLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

func eventually(t *testing.T, within time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestQueryHub_RegisteredEnginesByIdentAndTheirLoad(t *testing.T) {
	needIPyParallel(t)
	noLeaks(t)
	c := startController(t)
	c.startEngine(t, "engine-a")
	c.startEngine(t, "engine-b")

	var st HubStatus
	eventually(t, 60*time.Second, "both engines registered", func() error {
		var err error
		if st, err = QueryHub(t.Context(), c.addr(), []byte(c.key)); err != nil {
			return err
		}
		if len(st.Engines) != 2 {
			return fmt.Errorf("engines %+v", st.Engines)
		}
		return nil
	})
	uuids := map[string]int{}
	for _, e := range st.Engines {
		uuids[e.UUID] = e.ID
		if e.Queue+e.Tasks != 0 {
			t.Errorf("engine %+v busy before any task", e)
		}
	}
	busyID, ok := uuids["engine-b"]
	if _, okA := uuids["engine-a"]; !ok || !okA {
		t.Fatalf("engines %+v, want the idents engine-a and engine-b", st.Engines)
	}

	// A real client keeps engine-b busy for a while.
	client := fmt.Sprintf(`import ipyparallel as ipp, time
rc = ipp.Client(%q, timeout=30)
ar = rc[%d].apply_async(time.sleep, 8)
ar.get(timeout=60)
`, c.clientFile, busyID)
	start(t, c.dir, "-c", client)
	eventually(t, 30*time.Second, "engine-b busy, engine-a idle", func() error {
		st, err := QueryHub(t.Context(), c.addr(), []byte(c.key))
		if err != nil {
			return err
		}
		for _, e := range st.Engines {
			if busy := e.Queue+e.Tasks > 0; busy != (e.UUID == "engine-b") {
				return fmt.Errorf("engines %+v", st.Engines)
			}
		}
		return nil
	})
	eventually(t, 30*time.Second, "the task completed", func() error {
		st, err := QueryHub(t.Context(), c.addr(), []byte(c.key))
		if err != nil {
			return err
		}
		for _, e := range st.Engines {
			if e.UUID == "engine-b" && (e.Completed != 1 || e.Queue+e.Tasks != 0) {
				return fmt.Errorf("engine %+v", e)
			}
		}
		return nil
	})
}

func TestQueryHub_FailsFastOnAWrongKeyOrNoHub(t *testing.T) {
	needIPyParallel(t)
	noLeaks(t)
	c := startController(t)

	// ipyparallel 7.1's hub means to answer a badly signed request with hub_error but fails
	// to (its log: "list indices must be integers"), so only the context ends the wait.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	began := time.Now()
	_, err := QueryHub(ctx, c.addr(), []byte("not-the-key"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(began) > 2500*time.Millisecond {
		t.Errorf("wrong key: %v after %s, want the context's deadline", err, time.Since(began))
	}

	// Nothing listens on another loopback address's registration port.
	ctx, cancel = context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	began = time.Now()
	if _, err := QueryHub(ctx, net.JoinHostPort("127.0.76.1", strconv.Itoa(RegistrationPort)), []byte(c.key)); err == nil {
		t.Error("no hub answered, yet no error")
	}
	if d := time.Since(began); d > 3500*time.Millisecond {
		t.Errorf("no hub: took %s, past the context's 3 s", d)
	}
}

func TestConnectionFiles_LayoutAndValidation(t *testing.T) {
	conn := Connection{Key: "abc", Interface: "tcp://c1-ipcontroller.ns.svc", Location: "c1"}
	eng, err := EngineFile(conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"registration": 10101`, `"hb_pong": 10107`, "\"broadcast\": [\n    10108,\n    10109\n  ]",
		`"interface": "tcp://c1-ipcontroller.ns.svc"`, `"curve_serverkey": null`, `"signature_scheme": "hmac-sha256"`} {
		if !bytes.Contains(eng, []byte(want)) {
			t.Errorf("engine file lacks %s:\n%s", want, eng)
		}
	}
	cl, err := ClientFile(conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"registration": 10101`, `"mux": 10111`, `"task_scheme": "leastload"`, `"broadcast": 10115`, `"key": "abc"`} {
		if !bytes.Contains(cl, []byte(want)) {
			t.Errorf("client file lacks %s:\n%s", want, cl)
		}
	}
	if p := ServicePorts(); len(p) != 15 || p[0] != 10101 || p[14] != 10115 {
		t.Errorf("service ports %v", p)
	}
	for _, bad := range []Connection{{Interface: "tcp://x"}, {Key: "k y", Interface: "tcp://x"}, {Key: "k", Interface: "x"},
		{Key: "k", Interface: "tcp://x:1"}, {Key: "k", Interface: "tcp://"}} {
		if _, err := EngineFile(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
