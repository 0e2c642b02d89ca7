package podns

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// initArg0 is the argv[0] under which this binary runs as a sandbox's init.
const initArg0 = "nbkube-pod-init"

// Files the init finds open: the spec to read, and the control socket; for a sandbox of a
// distinct user, the init program it was executed from and then the volumes' mounts.
const (
	specFD     = 3
	controlFD  = 4
	exeFD      = 5
	firstMount = 6
)

// initSpec is what the init reads.
type initSpec struct {
	Spec
	// Distinct is a sandbox of a user of the machine other than its starter's (Spec.Host);
	// MountFDs are then the descriptors of the mounts the host made of Spec.Mounts, in order.
	Distinct bool  `json:"distinct,omitempty"`
	MountFDs []int `json:"mountFDs,omitempty"`
}

// initCaps are the capabilities, in its own user namespace, that the init builds the
// sandbox with: mounts and pivot_root, the loopback interface, the hostname, and dropping the
// bounding set; and, kept by the threads that answer the node's requests (not the one that
// starts commands, which drops every capability), ports below 1024 for the node's servers
// inside (the sandbox's DNS).
var initCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SYS_CHROOT, unix.CAP_SETPCAP, unix.CAP_NET_BIND_SERVICE}

// startTimeout bounds how long the init may take to build the sandbox and start the command.
const startTimeout = 30 * time.Second

// namespaces are the namespaces a sandbox gets.
const namespaces = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
	syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS

// Command is a sandbox about to start: Cmd is the init's process, which the caller may
// give its standard streams (files), process group and parent-death signal, then starts with
// Start; Started must follow a successful Start.
type Command struct {
	Cmd *exec.Cmd
	// spawner starts the init when there is one; else this process forks it.
	spawner *Spawner
	process *os.Process
	// spec is sent to the init once it runs.
	spec       []byte
	specWrite  *os.File
	childFiles []*os.File
	control    *net.UnixConn
	// routeOut is made by this process before the init reads its spec (root's node).
	routeOut *RouteOut
}

// NewCommand prepares the sandbox of spec. Its init is the program init, which must call
// RunInitIfAsked first thing (import this package); empty: this very binary.
func NewCommand(spec Spec, init string) (*Command, error) {
	return newCommand(spec, init, nil)
}

// NewCommand is as the package's NewCommand of the spawner's init, whose Start has the
// spawner start the init (and the holder of its volumes' user namespace, when it needs one).
func (s *Spawner) NewCommand(spec Spec) (*Command, error) {
	return newCommand(spec, s.init, s)
}

func newCommand(spec Spec, init string, sp *Spawner) (*Command, error) {
	if init == "" {
		init = "/proc/self/exe"
	}
	spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, err
	}
	is := initSpec{Spec: spec, Distinct: spec.distinct()}
	if spec.RouteOut != nil && hostMakesRouteOut() {
		is.RouteOut = nil
	}
	var host *hostFiles
	if is.Distinct {
		var err error
		if host, err = openHostFiles(&spec, init, sp); err != nil {
			return nil, err
		}
		for i := range host.mounts {
			is.MountFDs = append(is.MountFDs, firstMount+i)
		}
	}
	b, err := json.Marshal(is)
	if err != nil {
		host.close()
		return nil, err
	}
	specRead, specWrite, err := os.Pipe()
	if err != nil {
		host.close()
		return nil, err
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		host.close()
		specRead.Close()
		specWrite.Close()
		return nil, err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control-init")
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		host.close()
		specRead.Close()
		specWrite.Close()
		theirs.Close()
		return nil, err
	}
	cmd := &exec.Cmd{
		Path:       init,
		Args:       []string{initArg0},
		Env:        []string{},
		ExtraFiles: []*os.File{specRead, theirs},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  namespaces,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: int(spec.UID), HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: int(spec.GID), HostID: os.Getgid(), Size: 1}},
			// An unprivileged user may map its group only once setgroups is denied.
			GidMappingsEnableSetgroups: false,
			// What the init needs to build the sandbox, kept across its exec (as ambient
			// capabilities, since it is not UID 0 inside); it clears them before the command.
			AmbientCaps: initCaps,
		},
	}
	children := []*os.File{specRead, theirs}
	if host != nil {
		// Root maps another user: the init becomes UID inside (its own user is not mapped
		// there), with no supplementary group of root's, and is executed from the program
		// the starter opened, which that user may not reach by its path.
		a := cmd.SysProcAttr
		a.UidMappings[0].HostID, a.GidMappings[0].HostID = int(spec.Host.UID), int(spec.Host.GID)
		a.GidMappingsEnableSetgroups = true
		a.Credential = &syscall.Credential{Uid: spec.UID, Gid: spec.GID, Groups: []uint32{}}
		cmd.Path = fmt.Sprintf("/proc/self/fd/%d", exeFD)
		cmd.ExtraFiles = append(cmd.ExtraFiles, host.exe)
		cmd.ExtraFiles = append(cmd.ExtraFiles, host.mounts...)
		children = cmd.ExtraFiles
	}
	c := &Command{Cmd: cmd, spawner: sp, spec: b, specWrite: specWrite, childFiles: children, control: fc.(*net.UnixConn)}
	if spec.RouteOut != nil && hostMakesRouteOut() {
		c.routeOut = spec.RouteOut
	}
	return c, nil
}

// Start starts the init. Through a spawner, Cmd may not ask for a parent-death signal: the
// init always has SIGKILL for its starter's death.
func (c *Command) Start() error {
	if c.spawner == nil {
		if err := c.Cmd.Start(); err != nil {
			return err
		}
		c.process = c.Cmd.Process
		return nil
	}
	a := *c.Cmd.SysProcAttr
	a.Pdeathsig = 0
	cmd := *c.Cmd
	cmd.SysProcAttr = &a
	p, err := c.spawner.start(&cmd)
	if err != nil {
		return err
	}
	c.process = p
	return nil
}

// Process is the started init's process.
func (c *Command) Process() *os.Process {
	if c.process == nil {
		// Started by Cmd.Start.
		return c.Cmd.Process
	}
	return c.process
}

// Wait waits for the started init to end. The error is that of waiting: the state tells
// how it ended.
func (c *Command) Wait() (*os.ProcessState, error) {
	return c.Process().Wait()
}

// Close releases what a Command that was never started holds.
func (c *Command) Close() {
	for _, f := range c.childFiles {
		f.Close()
	}
	c.specWrite.Close()
	_ = c.control.Close()
}

// Started sends the init its spec and waits until the command runs or could not start; the
// error then says why (a missing executable, a mount that failed), as a container runtime's
// start error would. It returns the Control of the running sandbox.
func (c *Command) Started() (*Control, error) {
	for _, f := range c.childFiles {
		f.Close()
	}
	var tun *os.File
	var tunErr error
	if c.routeOut != nil {
		// The init waits for its spec: eth0 is there before the command runs.
		tun, tunErr = makeRouteOutOf(c.Process().Pid, c.routeOut)
	}
	started := false
	defer func() {
		if !started && tun != nil {
			tun.Close()
		}
	}()
	go func() {
		defer c.specWrite.Close()
		_, _ = c.specWrite.Write(c.spec)
	}()
	_ = c.control.SetReadDeadline(time.Now().Add(startTimeout))
	var msg startMessage
	buf := make([]byte, 4096)
	n, err := c.control.Read(buf)
	if err == nil && n == 0 {
		err = errors.New("the sandbox ended before starting its command")
	}
	if err == nil {
		err = json.Unmarshal(buf[:n], &msg)
	}
	if err != nil {
		_ = c.control.Close()
		return nil, fmt.Errorf("starting the sandbox: %w", err)
	}
	if msg.Error != "" {
		_ = c.control.Close()
		return nil, errors.New(msg.Error)
	}
	_ = c.control.SetReadDeadline(time.Time{})
	ctl := newControl(c.control)
	ctl.routeOut, ctl.routeOutErr, started = tun, tunErr, true
	return ctl, nil
}

// startMessage is the init's first word on the control socket.
type startMessage struct {
	// PID is the command's process ID inside the sandbox.
	PID   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// CheckHost makes a sandbox that runs as host, a user of the machine other than the
// caller's (root's), writes a file on a volume, and tells why it could not, if it could not
// or if the file is not the caller's on the machine: a kernel without idmapped mounts (before
// Linux 5.12), or a file system of scratch that cannot be idmapped. scratch is an empty
// directory it may use; init is as NewCommand's.
func CheckHost(scratch, init string, host HostIDs) error {
	return checkHost(scratch, init, nil, host)
}

// CheckHost is as the package's CheckHost, with the spawner starting the sandbox.
func (s *Spawner) CheckHost(scratch string, host HostIDs) error {
	return checkHost(scratch, s.init, s, host)
}

func checkHost(scratch, init string, sp *Spawner, host HostIDs) error {
	root, vol := filepath.Join(scratch, "root"), filepath.Join(scratch, "volume")
	for _, d := range []string{root, vol} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := run(Spec{Path: "/bin/sh", Argv: []string{"sh", "-c", "echo ok > /volume/written"}, Root: root,
		Host: &host, Mounts: []Mount{{Source: vol, Target: "/volume"}}}, init, sp); err != nil {
		return err
	}
	fi, err := os.Stat(filepath.Join(vol, "written"))
	if err != nil {
		return fmt.Errorf("a file written on a volume: %w", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid() {
		return fmt.Errorf("a file written on a volume belongs to %d:%d on the machine, not to %d:%d", st.Uid, st.Gid, os.Getuid(), os.Getgid())
	}
	return nil
}

// Check makes a sandbox that runs /bin/true and tells why it could not, if it could not: a
// kernel without unprivileged user namespaces, a seccomp or AppArmor policy that forbids them,
// or a system without /bin/true. scratch is an empty directory it may use; init is as
// NewCommand's.
func Check(scratch, init string) error {
	return run(Spec{Path: "/bin/true", Argv: []string{"true"}, Root: scratch}, init, nil)
}

// Check is as the package's Check, with the spawner starting the sandbox: it also tells
// why the spawner cannot start one.
func (s *Spawner) Check(scratch string) error {
	return run(Spec{Path: "/bin/true", Argv: []string{"true"}, Root: scratch}, s.init, s)
}

// run runs spec's sandbox to its end, and says why it failed if it did.
func run(spec Spec, init string, sp *Spawner) error {
	c, err := newCommand(spec, init, sp)
	if err != nil {
		return err
	}
	c.Cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := c.Start(); err != nil {
		c.Close()
		return fmt.Errorf("making the namespaces: %w", err)
	}
	control, err := c.Started()
	if err != nil {
		_ = c.Process().Kill()
		_, _ = c.Wait()
		return err
	}
	defer func() { _ = control.Close() }()
	ps, err := c.Wait()
	if err == nil && !ps.Success() {
		err = &exec.ExitError{ProcessState: ps}
	}
	if err != nil {
		return fmt.Errorf("a command in the sandbox: %w", err)
	}
	return nil
}
