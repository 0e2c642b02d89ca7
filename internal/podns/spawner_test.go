package podns

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parentOf is the parent PID of process pid, from its stat.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...: comm may hold spaces, not ')'.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

func TestSpawner_StartsSandboxesAsTheCallersChildren(t *testing.T) {
	s := start(t, shell(`echo "init=$(tr '\0' ' ' < /proc/1/cmdline)"; exit 7`))
	if ppid := parentOf(t, s.cmd.Process().Pid); ppid != os.Getpid() {
		t.Errorf("the init's parent is %d, want this process, %d", ppid, os.Getpid())
	}
	code, out := s.wait(t)
	if code != 7 {
		t.Errorf("exit code %d, want the command's 7 (output %q)", code, out)
	}
	if got := results(out)["init"]; got != initArg0+" " {
		t.Errorf("PID 1 inside is %q, want the sandbox's own init", got)
	}
}

func TestSpawner_StartsAgainOnceItsProcessEnded(t *testing.T) {
	sp := NewSpawner("")
	t.Cleanup(sp.Close)
	if err := sp.Check(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	sp.mu.Lock()
	first := sp.proc
	_ = first.Kill()
	sp.mu.Unlock()
	// The first request after finds it gone and fails, or finds its end first.
	err := sp.Check(t.TempDir())
	if err != nil {
		if err = sp.Check(t.TempDir()); err != nil {
			t.Fatalf("after its process ended, the spawner starts none: %v", err)
		}
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.proc == nil || sp.proc.Pid == first.Pid {
		t.Error("the spawner did not start another process")
	}
}

func TestSpawner_RefusesWhatItCannotPass(t *testing.T) {
	sp := NewSpawner("")
	t.Cleanup(sp.Close)
	for name, cmd := range map[string]*exec.Cmd{
		"a stream that is not a file": {Path: "/bin/true", Stdout: &bytes.Buffer{}},
		"a parent-death signal":       {Path: "/bin/true", SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}},
		"a closed descriptor":         {Path: "/bin/true", ExtraFiles: []*os.File{nil}},
	} {
		if p, err := sp.start(cmd); err == nil {
			_, _ = p.Wait()
			t.Errorf("%s: started", name)
		}
	}
}

// starterEnv makes the test binary the starter of TestSpawner_SandboxEndsWithItsStarter.
const starterEnv = "PODNS_TEST_STARTER"

// TestSpawner_SandboxEndsWithItsStarter kills a process that started a sandbox through a
// spawner, as a node may be killed: the sandbox, which is that process's child and not the
// spawner's, must end with it, as it would if the node had forked it with Pdeathsig.
func TestSpawner_SandboxEndsWithItsStarter(t *testing.T) {
	if os.Getenv(starterEnv) != "" {
		sp := NewSpawner("")
		c, err := sp.NewCommand(Spec{Path: "/bin/sleep", Argv: []string{"sleep", "600"}, Root: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Started(); err != nil {
			t.Fatal(err)
		}
		// The spawner goes first: the sandbox must not depend on it.
		sp.Close()
		os.Stdout.WriteString("init " + strconv.Itoa(c.Process().Pid) + "\n")
		time.Sleep(time.Hour)
	}
	starter := exec.Command(os.Args[0], "-test.run", "^TestSpawner_SandboxEndsWithItsStarter$", "-test.count=1")
	starter.Env = append(os.Environ(), starterEnv+"=1")
	starter.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := starter.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := starter.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "init "); ok {
			pid, _ = strconv.Atoi(p)
			break
		}
	}
	if pid == 0 {
		_ = starter.Process.Kill()
		_ = starter.Wait()
		t.Fatal("the starter started no sandbox")
	}
	if ppid := parentOf(t, pid); ppid != starter.Process.Pid {
		t.Errorf("the init's parent is %d, want the starter, %d", ppid, starter.Process.Pid)
	}
	_ = starter.Process.Kill()
	_ = starter.Wait()
	// Gone, or a zombie whose new parent has not reaped it yet.
	waitFor(t, "the sandbox's end", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err != nil || strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))[0] == "Z"
	})
}
