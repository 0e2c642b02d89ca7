package podns

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testHostID is a user and group of the machine no file or process of a test machine has.
const testHostID = 0x7000_0ff1

// hostUID is the user of the machine that process pid runs as.
func hostUID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			return strings.Fields(v)[0]
		}
	}
	t.Fatal("no Uid line")
	return ""
}

func TestSandbox_RunsAsAUserOfTheMachineOfItsOwn(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root may map another user of the machine")
	}
	// Under a directory only root may enter, as nbkube's data directory is: the sandbox's
	// user could not reach its volumes by their paths.
	private := t.TempDir()
	if err := os.Chmod(private, 0o700); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(private, "home-ann")
	secret := filepath.Join(private, "secret")
	for _, d := range []string{home, secret} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The starter's own files, readable by their owner only.
	for p, s := range map[string]string{filepath.Join(home, "mine.txt"): "ann's", filepath.Join(secret, "token"): "s3cret"} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	spec := shell(`
echo "ids=$(id -u) $(id -g) $(id -G)"
echo "mine=$(cat /home/jovyan/mine.txt)"
echo "owner=$(stat -c %u:%g /home/jovyan/mine.txt)"
echo "token=$(cat /var/run/secret/token)"
echo written > /home/jovyan/new.txt && echo "write=ok"
echo x > /var/run/secret/other 2>/dev/null && echo "rowrite=yes" || echo "rowrite=no"
echo "caps=$(grep CapEff /proc/self/status | tr -d '\t')"
echo started
exec sleep 60
`)
	spec.Root = filepath.Join(private, "rootfs")
	if err := os.Mkdir(spec.Root, 0o700); err != nil {
		t.Fatal(err)
	}
	spec.Host = &HostIDs{UID: testHostID, GID: testHostID}
	spec.Mounts = []Mount{
		{Source: home, Target: "/home/jovyan"},
		{Source: secret, Target: "/var/run/secret", ReadOnly: true},
	}
	s := start(t, spec)
	var out string
	waitFor(t, "the script's last line", func() bool {
		b, _ := os.ReadFile(s.out)
		out = string(b)
		return strings.Contains(out, "started")
	})
	got := results(out)
	want := map[string]string{
		// No supplementary group of root's.
		"ids": "1000 1000 1000", "mine": "ann's", "owner": "1000:1000", "token": "s3cret",
		"write": "ok", "rowrite": "no", "caps": "CapEff:0000000000000000",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q\n%s", k, got[k], v, out)
		}
	}
	// The init and the command run as the sandbox's own user of the machine.
	if uid := hostUID(t, s.cmd.Process().Pid); uid != fmt.Sprint(testHostID) {
		t.Errorf("the sandbox's init runs as %s on the machine, want %d", uid, testHostID)
	}
	// What it wrote on its volume is the starter's.
	fi, err := os.Stat(filepath.Join(home, "new.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid() {
		t.Errorf("a file written inside belongs to %d:%d on the host, want %d:%d", st.Uid, st.Gid, os.Getuid(), os.Getgid())
	}
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestCheckIdmap_AcceptsAnIdmappableDirectoryAndRefusesOtherwise(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root may idmap a mount")
	}
	host := HostIDs{UID: testHostID, GID: testHostID}
	if err := CheckIdmap(t.TempDir(), "", host); err != nil {
		t.Errorf("a directory of the test's file system: %v", err)
	}
	// procfs cannot be idmapped.
	if err := CheckIdmap("/proc/self", "", host); err == nil {
		t.Error("/proc/self passed the check")
	}
}

// The volumes' user namespace of a host user is made once and kept: making one forks the
// node whole. Another host user gets one of its own.
func TestUsernsCache_KeepsOneNamespacePerHostUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root maps other users of the machine")
	}
	c := &usernsCache{fds: map[HostIDs]int{}}
	// The holders are started as the node starts them.
	sp := NewSpawner("")
	defer sp.Close()
	ino := func(ids HostIDs) uint64 {
		t.Helper()
		fd, err := c.get("", sp, ids)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	a := HostIDs{UID: testHostID, GID: testHostID}
	b := HostIDs{UID: testHostID + 1, GID: testHostID + 1}
	first := ino(a)
	if again := ino(a); again != first {
		t.Errorf("a second ask for %v made another namespace (%d, then %d)", a, first, again)
	}
	if other := ino(b); other == first {
		t.Errorf("%v got %v's namespace", b, a)
	}
	if len(c.fds) != 2 {
		t.Errorf("the cache holds %d namespaces, want 2", len(c.fds))
	}
}
