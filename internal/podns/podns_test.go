package podns

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sandbox is a started sandbox of a test.
type sandbox struct {
	cmd     *Command
	control *Control
	out     string
	// ended is closed once the init was waited for; state is how it ended.
	ended chan struct{}
	state *os.ProcessState
}

// start runs spec in a sandbox whose output goes to a file of the test, started by a
// spawner as the node's are.
func start(t *testing.T, spec Spec) *sandbox {
	t.Helper()
	if spec.Root == "" {
		spec.Root = t.TempDir()
	}
	sp := NewSpawner("")
	t.Cleanup(sp.Close)
	c, err := sp.NewCommand(spec)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c.Cmd.Stdout, c.Cmd.Stderr = f, f
	c.Cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := c.Start(); err != nil {
		c.Close()
		t.Fatalf("starting the init: %v", err)
	}
	control, err := c.Started()
	if err != nil {
		_, _ = c.Wait()
		b, _ := os.ReadFile(out)
		t.Fatalf("starting the sandbox: %v\n%s", err, b)
	}
	s := &sandbox{cmd: c, control: control, out: out, ended: make(chan struct{})}
	go func() {
		s.state, _ = c.Wait()
		close(s.ended)
	}()
	t.Cleanup(func() {
		_ = c.Process().Kill()
		<-s.ended
		control.Close()
	})
	return s
}

// wait waits for the sandbox to end and returns its exit code and output.
func (s *sandbox) wait(t *testing.T) (int, string) {
	t.Helper()
	select {
	case <-s.ended:
	case <-time.After(60 * time.Second):
		t.Fatal("the sandbox did not end")
	}
	b, _ := os.ReadFile(s.out)
	if s.state == nil {
		t.Fatal("the sandbox could not be waited for")
	}
	return s.state.ExitCode(), string(b)
}

func shell(script string) Spec {
	return Spec{Path: "/bin/sh", Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, UID: 1000, GID: 1000}
}

// results parses the KEY=value lines a script printed.
func results(out string) map[string]string {
	m := map[string]string{}
	s := bufio.NewScanner(strings.NewReader(out))
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), "="); ok {
			m[k] = v
		}
	}
	return m
}

func TestSandbox_SeesItsVolumesAndTheSystemOnly(t *testing.T) {
	host := t.TempDir()
	vol := filepath.Join(host, "home-ann")
	ro := filepath.Join(host, "secret")
	other := filepath.Join(host, "home-ben")
	for _, d := range []string{vol, ro, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(vol, "mine.txt"), "ann's")
	mustWrite(t, filepath.Join(ro, "token"), "s3cret")
	mustWrite(t, filepath.Join(other, "theirs.txt"), "ben's")
	spec := shell(`
echo "uid=$(id -u) gid=$(id -g)"
echo "mine=$(cat /home/jovyan/mine.txt)"
echo written > /home/jovyan/new.txt && echo "write=ok"
echo "token=$(cat /var/run/secret/token)"
echo x > /var/run/secret/other 2>/dev/null && echo "rowrite=yes" || echo "rowrite=no"
ls ` + other + ` >/dev/null 2>&1 && echo "other=visible" || echo "other=hidden"
ls ` + host + ` >/dev/null 2>&1 && echo "host=visible" || echo "host=hidden"
echo x > /usr/nbkube-test 2>/dev/null && echo "usr=writable" || echo "usr=readonly"
echo x > /new-at-root 2>/dev/null && echo "root=writable" || echo "root=readonly"
echo "shadow=$(wc -c < /etc/shadow)"
echo "procs=$(ls /proc | grep -c '^[0-9]')"
echo "init=$(tr '\0' ' ' < /proc/1/cmdline)"
echo "tmp=$(echo t > /tmp/t && cat /tmp/t)"
echo "hostname=$(cat /proc/sys/kernel/hostname)"
echo "null=$(echo gone > /dev/null && echo ok)"
echo "caps=$(grep CapEff /proc/self/status | tr -d '\t')"
echo "nnp=$(grep NoNewPrivs /proc/self/status | tr -d '\t')"
`)
	spec.Hostname = "kernel-abc"
	spec.Mounts = []Mount{
		{Source: vol, Target: "/home/jovyan"},
		{Source: ro, Target: "/var/run/secret", ReadOnly: true},
	}
	code, out := start(t, spec).wait(t)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	got := results(out)
	want := map[string]string{
		"uid": "1000 gid=1000", "mine": "ann's", "write": "ok", "token": "s3cret", "rowrite": "no",
		"other": "hidden", "host": "hidden", "usr": "readonly", "root": "readonly", "shadow": "0",
		"init": initArg0 + " ", "tmp": "t", "hostname": "kernel-abc", "null": "ok",
		"caps": "CapEff:0000000000000000", "nnp": "NoNewPrivs:1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q\n%s", k, got[k], v, out)
		}
	}
	// The shell, ls and the like, the init: nothing of the machine.
	if n, _ := strconv.Atoi(got["procs"]); n < 2 || n > 6 {
		t.Errorf("the sandbox sees %d processes, want its own 2-6", n)
	}
	// What the sandbox wrote is on the volume, as the host's user.
	fi, err := os.Stat(filepath.Join(vol, "new.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() {
		t.Errorf("a file written inside belongs to %d on the host, want %d", st.Uid, os.Getuid())
	}
}

func TestSandbox_ReachesNothingOnTheNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	spec := Spec{Path: "/bin/bash", Argv: []string{"bash", "-c", fmt.Sprintf(
		`(exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null && echo reach=yes || echo reach=no`, port)}, Env: []string{"PATH=/usr/bin:/bin"}, UID: 1000, GID: 1000}
	code, out := start(t, spec).wait(t)
	if code != 0 || results(out)["reach"] != "no" {
		t.Fatalf("exit %d: %s", code, out)
	}
	select {
	case <-accepted:
		t.Fatal("a connection from the sandbox reached the host's loopback")
	default:
	}
}

func TestSandbox_DialConnectsToAServerInside(t *testing.T) {
	// A server on the pod IP inside answers each line with itself upper-cased.
	spec := Spec{Path: "/usr/bin/python3", Argv: []string{"python3", "-c", `
import socket, sys
s = socket.socket(); s.bind(("127.0.0.9", 8888)); s.listen(); print("listening", flush=True)
while True:
    c, _ = s.accept(); c.sendall(c.recv(100).upper()); c.close()
`}, Env: []string{"PATH=/usr/bin:/bin"}, UID: 1000, GID: 1000, PodIP: "127.0.0.9"}
	s := start(t, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var conn net.Conn
	var err error
	for ctx.Err() == nil {
		if conn, err = s.control.Dial(ctx, 8888); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if err != nil || string(b) != "HELLO" {
		t.Fatalf("got %q, %v", b, err)
	}
	if _, err := s.control.Dial(ctx, 8889); err == nil {
		t.Fatal("a port nothing listens on was connected")
	}
	_ = s.cmd.Process().Signal(syscall.SIGTERM)
	if code, out := s.wait(t); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d after SIGTERM, want %d: %s", code, 128+int(syscall.SIGTERM), out)
	}
	if _, err := s.control.Dial(context.Background(), 8888); !errors.Is(err, ErrEnded) {
		t.Fatalf("Dial after the end: %v, want ErrEnded", err)
	}
}

func TestSandbox_ListenTakesConnectionsMadeInside(t *testing.T) {
	// The command connects to another pod's address inside its own network, trying again
	// until the listener is there (its stdin is /dev/null: nothing can tell it when), and
	// prints what came back.
	spec := Spec{Path: "/bin/bash", Argv: []string{"bash", "-c",
		`for ((i = 0; i < 400; i++)); do { exec 3<>/dev/tcp/127.0.0.77/9999; } 2>/dev/null && break; sleep 0.05; done
		echo ping >&3 && read -r answer <&3 && echo "answer=$answer"`},
		Env: []string{"PATH=/usr/bin:/bin"}, UID: 1000, GID: 1000, PodIP: "127.0.0.9", Root: t.TempDir()}
	var out strings.Builder
	c, control := startInto(t, spec, &out)
	defer control.Close()
	ln, err := control.Listen(context.Background(), "127.0.0.77", 9999)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		line, _ := bufio.NewReader(conn).ReadString('\n')
		_, _ = conn.Write([]byte("pong to " + line))
	}()
	if err := c.Cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got := results(out.String())["answer"]; got != "pong to ping" {
		t.Fatalf("the command inside got %q: %s", got, out.String())
	}
	// The host's own 127.0.0.77:9999 is not the sandbox's.
	if conn, err := net.DialTimeout("tcp", "127.0.0.77:9999", time.Second); err == nil {
		conn.Close()
		t.Fatal("the listener made inside the sandbox took a connection on the host")
	}
}

func TestSandbox_ExitStatusAndStartErrors(t *testing.T) {
	if code, out := start(t, shell("exit 3")).wait(t); code != 3 {
		t.Fatalf("exit %d, want 3: %s", code, out)
	}
	spec := shell("true")
	spec.Path = "/usr/bin/no-such-program"
	if err := startError(t, spec); err == nil || !strings.Contains(err.Error(), "no-such-program") {
		t.Fatalf("Started: %v, want the missing program named", err)
	}
	spec = shell("true")
	spec.Mounts = []Mount{{Source: "/nonexistent-volume", Target: "/data"}}
	if err := startError(t, spec); err == nil || !strings.Contains(err.Error(), "/data") {
		t.Fatalf("Started: %v, want the failed mount named", err)
	}
}

// startError is what Started says of a sandbox of spec, which is expected not to start.
func startError(t *testing.T, spec Spec) error {
	t.Helper()
	spec.Root = t.TempDir()
	c, err := NewCommand(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	c.Cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := c.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	control, err := c.Started()
	_ = c.Cmd.Wait()
	if control != nil {
		_ = control.Close()
	}
	return err
}

func mustWrite(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSandbox_WorksForAnOrdinaryUser runs the other tests again as an ordinary user (nobody)
// when run as root: a sandbox needs no privilege of the machine.
func TestSandbox_WorksForAnOrdinaryUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("already an ordinary user: the other tests are the check")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir(), whose parent only root may enter.
	dir, err := os.MkdirTemp("", "podns-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "podns.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^TestSandbox_(SeesItsVolumesAndTheSystemOnly|ReachesNothingOnTheNetwork|DialConnectsToAServerInside|ListenPacketServesAPrivilegedPortInsideButTheCommandGetsNone|RouteOutCarriesWhatItSendsOut)$", "-test.count=1", "-test.v")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + dir, "HOME=" + dir}
	cmd.Dir = dir
	const nobody = 65534
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	// The route out needs a /dev/net/tun the user may open, which some machines lack.
	passed, skipped := strings.Count(string(out), "--- PASS"), strings.Contains(string(out), "--- SKIP: TestSandbox_RouteOutCarriesWhatItSendsOut")
	if err != nil || passed != 5 && (passed != 4 || !skipped) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}

func TestCheck_SaysWhyNoSandboxCanBeMade(t *testing.T) {
	if err := Check(t.TempDir(), ""); err != nil {
		t.Fatalf("this machine makes sandboxes (the other tests do), Check says: %v", err)
	}
	notADir := filepath.Join(t.TempDir(), "file")
	mustWrite(t, notADir, "")
	if err := Check(notADir, ""); err == nil || !strings.Contains(err.Error(), "root") {
		t.Fatalf("Check on a root that is a file: %v, want the root's mount named", err)
	}
}

// The command gets its three standard streams and nothing else of the node's: not the control
// socket, not the spec's pipe, not what the node inherited.
func TestSandbox_CommandGetsNoDescriptorOfTheNode(t *testing.T) {
	// ls lists its own descriptor of the directory too: 3.
	code, out := start(t, shell("ls /proc/self/fd")).wait(t)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if got := strings.Fields(out); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
		t.Errorf("the command's descriptors: %v, want 0 1 2 (and ls's 3)", got)
	}
}

// Exec runs a command inside a running sandbox, as its user, without capabilities, and
// reports its exit, its output (bounded) and a timeout; the sandbox's own command runs on.
func TestSandbox_ExecRunsInsideAndReportsTheEnd(t *testing.T) {
	s := start(t, shell("echo started; exec sleep 60"))
	env := []string{"PATH=/usr/bin:/bin", "GREETING=hello"}
	ctx := t.Context()
	r, err := s.control.Exec(ctx, Exec{Argv: []string{"sh", "-c",
		`echo "greeting=$GREETING"; echo "uid=$(id -u)"; echo "pwd=$(pwd)"; echo "init=$(tr '\0' ' ' </proc/1/cmdline)";
		 grep -E '^Cap(Eff|Bnd):' /proc/self/status | tr -d '\t' | sed 's/:/=/'; exit 3`}, Env: env, Dir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	got := results(string(r.Output))
	if r.ExitCode != 3 || r.TimedOut || got["greeting"] != "hello" || got["uid"] != "1000" || got["pwd"] != "/tmp" ||
		!strings.HasPrefix(got["init"], initArg0) || got["CapEff"] != "0000000000000000" || got["CapBnd"] != "0000000000000000" {
		t.Errorf("exec: exit %d, timed out %v, output:\n%s", r.ExitCode, r.TimedOut, r.Output)
	}

	r, err = s.control.Exec(ctx, Exec{Argv: []string{"sleep", "30"}, Env: env, Timeout: 300 * time.Millisecond})
	if err != nil || !r.TimedOut || r.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("exec past its timeout: %+v, %v", r, err)
	}
	r, err = s.control.Exec(ctx, Exec{Argv: []string{"sh", "-c", "head -c 100000 /dev/zero"}, Env: env})
	if err != nil || r.ExitCode != 0 || len(r.Output) != MaxExecOutput {
		t.Errorf("exec of much output: exit %d, %d bytes, %v", r.ExitCode, len(r.Output), err)
	}
	if _, err := s.control.Exec(ctx, Exec{Argv: []string{"no-such-command"}, Env: env}); err == nil || !strings.Contains(err.Error(), "no-such-command") {
		t.Errorf("exec of a missing command: %v", err)
	}
	// The sandbox's command still runs.
	if err := s.cmd.Process().Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the sandbox ended: %v", err)
	}
}

func TestSandbox_ListenPacketServesAPrivilegedPortInsideButTheCommandGetsNone(t *testing.T) {
	// The command asks the node's server at 127.0.0.100:53 (as a resolver asks its DNS
	// server) until it answers, and tries to bind a port below 1024 itself.
	spec := Spec{Path: "/usr/bin/python3", Argv: []string{"python3", "-c", `
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.1)
for _ in range(200):
    s.sendto(b"ping", ("127.0.0.100", 53))
    try:
        print("answer=" + s.recv(100).decode())
        break
    except socket.timeout:
        pass
try:
    socket.socket().bind(("127.0.0.1", 80))
    print("bind80=yes")
except PermissionError:
    print("bind80=no")
`}, Env: []string{"PATH=/usr/bin:/bin"}, UID: 1000, GID: 1000, Root: t.TempDir()}
	if os.Getuid() == 0 {
		// A user of the machine of its own too, as nbkube's sandboxes under root.
		spec.Host = &HostIDs{UID: testHostID, GID: testHostID}
	}
	var out strings.Builder
	c, control := startInto(t, spec, &out)
	defer control.Close()
	pc, err := control.ListenPacket(context.Background(), "127.0.0.100", 53)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 100)
		n, from, err := pc.ReadFrom(buf)
		if err == nil {
			_, _ = pc.WriteTo(append([]byte("pong to "), buf[:n]...), from)
		}
	}()
	if err := c.Cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	got := results(out.String())
	if got["answer"] != "pong to ping" || got["bind80"] != "no" {
		t.Fatalf("the command inside: %s", out.String())
	}
}

// startInto starts spec's sandbox with its output in out; the caller waits for its command
// and closes its control.
func startInto(t *testing.T, spec Spec, out *strings.Builder) (*Command, *Control) {
	t.Helper()
	c, err := NewCommand(spec, "")
	if err != nil {
		t.Fatal(err)
	}
	c.Cmd.Stdout, c.Cmd.Stderr = out, out
	if err := c.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	control, err := c.Started()
	if err != nil {
		_ = c.Cmd.Wait()
		t.Fatalf("starting the sandbox: %v\n%s", err, out.String())
	}
	return c, control
}
