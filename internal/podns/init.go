package podns

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxSpec bounds the spec the init reads.
const maxSpec = 4 << 20

// RunInitIfAsked runs this process as a sandbox's init when it was started as one (by
// Command), and never returns then; otherwise it returns at once. Programs that start
// sandboxes call it first thing in main, and so does this package's init, which covers test
// binaries.
func RunInitIfAsked() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case initArg0:
		os.Exit(runInit())
	case usernsHolderArg0:
		os.Exit(holdUserns())
	case spawnerArg0:
		os.Exit(runSpawner())
	}
}

func init() { RunInitIfAsked() }

// runInit builds the sandbox, starts the command and stays its PID 1; it returns the exit
// code.
func runInit() int {
	// Capabilities and no_new_privs are attributes of a thread, and a child inherits those of
	// the thread that forked it: this one, which drops them and starts the command.
	runtime.LockOSThread()
	// Its starter's death is its own, as a container's is its runtime's: a spawner's child
	// cannot have Go set this before it executes.
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
	control := os.NewFile(controlFD, "control")
	fail := func(err error) int {
		b, _ := json.Marshal(startMessage{Error: err.Error()})
		_, _ = control.Write(b)
		fmt.Fprintf(os.Stderr, "nbkube sandbox: %v\n", err)
		return 127
	}
	if err := closeOnExec(3); err != nil {
		return fail(fmt.Errorf("marking the node's descriptors close-on-exec: %w", err))
	}
	specFile := os.NewFile(specFD, "spec")
	b, err := io.ReadAll(io.LimitReader(specFile, maxSpec))
	specFile.Close()
	if err != nil {
		return fail(fmt.Errorf("reading the spec: %w", err))
	}
	var spec initSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fail(fmt.Errorf("reading the spec: %w", err))
	}
	if spec.Distinct {
		// Executed from it; the command needs it no more than any other of the node's files.
		_ = unix.Close(exeFD)
	}
	if err := loopbackUp(); err != nil {
		return fail(fmt.Errorf("bringing up the loopback interface: %w", err))
	}
	var routeOut *os.File
	if spec.RouteOut != nil {
		// Before the root is built: the device is the host's. A sandbox that cannot have
		// one still runs, with its loopback only; the node is told when it asks.
		if routeOut, err = makeRouteOut(spec.RouteOut); err != nil {
			fmt.Fprintf(os.Stderr, "nbkube sandbox: no route out: %v\n", err)
		}
	}
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fail(fmt.Errorf("setting the hostname: %w", err))
		}
	}
	if err := buildRoot(&spec); err != nil {
		return fail(err)
	}
	if err := dropPrivileges(); err != nil {
		return fail(err)
	}
	// Signals for the command, caught before it exists so that none is lost in between.
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCHLD)
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return fail(err)
	}
	proc, err := os.StartProcess(spec.Path, spec.Argv, &os.ProcAttr{
		Dir:   spec.Dir,
		Env:   spec.Env,
		Files: []*os.File{devNull, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	devNull.Close()
	if err != nil {
		return fail(fmt.Errorf("starting %s: %w", spec.Path, err))
	}
	b, _ = json.Marshal(startMessage{PID: proc.Pid})
	if _, err := control.Write(b); err != nil {
		// Whoever started the sandbox is gone.
		_ = syscall.Kill(-proc.Pid, syscall.SIGKILL)
		return 137
	}
	execs := make(chan execStart)
	go serveControl(control, spec.PodIP, routeOut, execs)
	return supervise(proc.Pid, signals, execs)
}

// supervise forwards signals to the command's process group, starts the commands of exec
// requests, and reaps every child (orphans come to PID 1) until the command itself has
// exited; its status is the init's. It runs on the thread that gave up the capabilities,
// which every process it starts inherits from; and since it both starts exec'd commands and
// reaps, it knows each one's PID before it can reap it.
func supervise(pid int, signals chan os.Signal, execs <-chan execStart) int {
	waiting := map[int]chan syscall.WaitStatus{}
	for {
		for {
			var ws syscall.WaitStatus
			got, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || got <= 0 {
				break
			}
			if got == pid {
				if ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return ws.ExitStatus()
			}
			if ch, ok := waiting[got]; ok {
				ch <- ws
				delete(waiting, got)
			}
		}
		select {
		case sig := <-signals:
			if sig != syscall.SIGCHLD {
				_ = syscall.Kill(-pid, sig.(syscall.Signal))
			}
		case e := <-execs:
			started := startExec(e.req)
			if started.err == nil {
				waiting[started.pid] = started.status
			}
			e.reply <- started
		}
	}
}

// serveControl answers dial, listen and exec requests until the other end closes the socket.
func serveControl(control *os.File, podIP string, routeOut *os.File, execs chan<- execStart) {
	fc, err := net.FileConn(control)
	control.Close()
	if err != nil {
		return
	}
	conn := fc.(*net.UnixConn)
	defer func() { _ = conn.Close() }()
	buf := make([]byte, maxControlMessage)
	for {
		n, err := conn.Read(buf)
		if err != nil || n == 0 {
			return
		}
		var req dialRequest
		if json.Unmarshal(buf[:n], &req) != nil {
			continue
		}
		if req.Exec != nil {
			go answerExec(conn, req, execs)
			continue
		}
		if req.RouteOut {
			go answerRouteOut(conn, req, routeOut)
			continue
		}
		go answerDial(conn, req, podIP)
	}
}

// answerRouteOut hands the node the TUN device of the sandbox's route out.
func answerRouteOut(conn *net.UnixConn, req dialRequest, routeOut *os.File) {
	rep := dialReply{ID: req.ID}
	var rights []byte
	if routeOut == nil {
		rep.Error = errNoRouteOut.Error()
	} else {
		rights = syscall.UnixRights(int(routeOut.Fd()))
	}
	b, _ := json.Marshal(rep)
	_, _, _ = conn.WriteMsgUnix(b, rights, nil)
}

// dialTimeout bounds a connection inside the sandbox: on loopback it is refused or accepted
// at once, unless the listener's backlog is full.
const dialTimeout = 10 * time.Second

func answerDial(conn *net.UnixConn, req dialRequest, podIP string) {
	rep := dialReply{ID: req.ID}
	var rights []byte
	var f *os.File
	var err error
	switch {
	case req.Listen != "" && req.UDP:
		var pc net.PacketConn
		if pc, err = net.ListenPacket("udp", net.JoinHostPort(req.Listen, strconv.Itoa(req.Port))); err == nil {
			f, err = pc.(*net.UDPConn).File()
			pc.Close()
		}
	case req.Listen != "":
		var ln net.Listener
		if ln, err = net.Listen("tcp", net.JoinHostPort(req.Listen, strconv.Itoa(req.Port))); err == nil {
			f, err = ln.(*net.TCPListener).File()
			ln.Close()
		}
	default:
		var c net.Conn
		if c, err = net.DialTimeout("tcp", net.JoinHostPort(podIP, strconv.Itoa(req.Port)), dialTimeout); err == nil {
			f, err = c.(*net.TCPConn).File()
			c.Close()
		}
	}
	if err == nil {
		defer f.Close()
		rights = syscall.UnixRights(int(f.Fd()))
	}
	if err != nil {
		rep.Error = err.Error()
	}
	b, _ := json.Marshal(rep)
	_, _, _ = conn.WriteMsgUnix(b, rights, nil)
}

// closeOnExec marks every descriptor from first on close-on-exec, as a container runtime
// closes every one past the standard three: the control socket, the spec's pipe and whatever
// the node inherited stay the init's, and no command it starts gets them. The control socket
// in a command's hands would let it answer the node's requests in the init's place.
func closeOnExec(first int) error {
	err := unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	tooOld := errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL)
	if err == nil || !tooOld {
		return err
	}
	// Linux before 5.11: one at a time.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= first {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
				return err
			}
		}
	}
	return nil
}

// loopbackUp brings up lo, the only interface of a new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dropPrivileges makes sure that nothing the init starts holds or gains a capability: an
// empty bounding set (exec then grants none, even to UID 0 inside) and no_new_privs, set on
// the calling thread, from which the command is forked. The init itself is not dumpable, so
// that nothing inside can read its memory or take its capabilities over.
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing dumpable: %w", err)
	}
	return nil
}
