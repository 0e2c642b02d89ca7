package podns

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// spawnerArg0 is the argv[0] under which the init program runs as a Spawner's process.
const spawnerArg0 = "nbkube-pod-spawner"

// spawnerFD is the spawner's end of its socket.
const spawnerFD = 3

// maxSpawnFiles bounds the descriptors of one request (the kernel's own bound on a message's,
// SCM_MAX_FD): the standard three, the spec, the control socket, the init program and the
// volumes' mounts.
const maxSpawnFiles = 253

// maxSpawnRequest bounds a request's JSON: a path, a few arguments, no environment.
const maxSpawnRequest = 64 << 10

// A Spawner starts the processes that make user namespaces, sandboxes' inits and the holders
// of the volumes' namespaces, from a small process of its own: the init program, run once as
// a spawner. The Go runtime cannot vfork into a new user namespace (the child waits, before it
// executes, for its parent to write its ID maps), so the process that makes one is copied
// whole; a node of a hundred megabytes takes about 14 ms a sandbox for that (2026-12-04, on a
// 2-core machine), the spawner, a few megabytes, about one. What it starts is its caller's
// child (CLONE_PARENT), which the caller signals and waits for as its own: nothing of a
// sandbox's life goes through the spawner once it started. A Spawner starts its process at
// its first request, and again at the next one after that process ended.
type Spawner struct {
	init string

	mu   sync.Mutex
	proc *os.Process
	conn *net.UnixConn
}

// NewSpawner is a Spawner whose process is the program init (as NewCommand's).
func NewSpawner(init string) *Spawner {
	if init == "" {
		init = "/proc/self/exe"
	}
	return &Spawner{init: init}
}

// Close ends the spawner's process; what it started goes on.
func (s *Spawner) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Spawner) stopLocked() {
	if s.conn != nil {
		// The spawner ends when its socket does.
		_ = s.conn.Close()
		s.conn = nil
	}
	if s.proc != nil {
		_ = s.proc.Kill()
		_, _ = s.proc.Wait()
		s.proc = nil
	}
}

// spawnRequest is what the spawner is asked to start: exec.Cmd's fields that say how, whose
// files come with it, in the order of the child's descriptors.
type spawnRequest struct {
	Path        string                 `json:"path"`
	Argv        []string               `json:"argv"`
	Env         []string               `json:"env"`
	Dir         string                 `json:"dir,omitempty"`
	Cloneflags  uintptr                `json:"cloneflags"`
	UIDMappings []syscall.SysProcIDMap `json:"uidMappings,omitempty"`
	GIDMappings []syscall.SysProcIDMap `json:"gidMappings,omitempty"`
	// Setgroups is GidMappingsEnableSetgroups.
	Setgroups   bool                `json:"setgroups,omitempty"`
	Credential  *syscall.Credential `json:"credential,omitempty"`
	AmbientCaps []uintptr           `json:"ambientCaps,omitempty"`
	Setpgid     bool                `json:"setpgid,omitempty"`
}

// spawnReply is the spawner's answer: the PID of the child, or why there is none.
type spawnReply struct {
	PID   int    `json:"pid,omitempty"`
	Error string `json:"error,omitempty"`
}

// start starts cmd as this process's child, as cmd.Start would: its Stdin, Stdout and Stderr
// must be files or nil (/dev/null), and it may not ask for a parent-death signal (the
// spawner's child has this process as its parent but cannot know it; an init sets its own).
func (s *Spawner) start(cmd *exec.Cmd) (*os.Process, error) {
	req, files, closeAfter, err := spawnRequestOf(cmd)
	defer func() {
		for _, f := range closeAfter {
			f.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		if err := s.startLocked(); err != nil {
			return nil, fmt.Errorf("starting the spawner: %w", err)
		}
	}
	reply, err := s.askLocked(b, fds)
	if err != nil {
		// Its process is gone or confused: the next request starts another.
		s.stopLocked()
		return nil, fmt.Errorf("the spawner: %w", err)
	}
	if reply.Error != "" {
		return nil, errors.New(reply.Error)
	}
	// The child is ours until we wait for it, so its PID names no other process.
	return os.FindProcess(reply.PID)
}

func (s *Spawner) askLocked(req []byte, fds []int) (spawnReply, error) {
	var reply spawnReply
	if _, _, err := s.conn.WriteMsgUnix(req, unix.UnixRights(fds...), nil); err != nil {
		return reply, err
	}
	buf := make([]byte, 4096)
	n, _, _, _, err := s.conn.ReadMsgUnix(buf, nil)
	if err != nil {
		return reply, err
	}
	if n == 0 {
		return reply, errors.New("it ended")
	}
	return reply, json.Unmarshal(buf[:n], &reply)
}

func (s *Spawner) startLocked() error {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "spawner"), os.NewFile(uintptr(fds[1]), "spawner-child")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return err
	}
	cmd := &exec.Cmd{
		Path:       s.init,
		Args:       []string{spawnerArg0},
		Env:        []string{},
		Stderr:     os.Stderr,
		ExtraFiles: []*os.File{theirs},
		// No new namespace: a plain vfork of this process, however large.
		SysProcAttr: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true},
	}
	if err := cmd.Start(); err != nil {
		fc.Close()
		return err
	}
	s.proc, s.conn = cmd.Process, fc.(*net.UnixConn)
	return nil
}

// spawnRequestOf is cmd as a request, with the files to send; closeAfter are those opened
// for it, to close once it is sent.
func spawnRequestOf(cmd *exec.Cmd) (req spawnRequest, files, closeAfter []*os.File, err error) {
	a := cmd.SysProcAttr
	if a == nil {
		a = &syscall.SysProcAttr{}
	}
	if a.Pdeathsig != 0 || a.Setsid || a.Setctty || a.Foreground || a.Chroot != "" || a.Unshareflags != 0 || a.Ptrace || a.Noctty {
		return req, nil, nil, errors.New("the spawner starts a process with new namespaces, an identity and a process group only")
	}
	for i, stream := range []any{cmd.Stdin, cmd.Stdout, cmd.Stderr} {
		switch f := stream.(type) {
		case nil:
			null, err := os.OpenFile(os.DevNull, map[bool]int{true: os.O_RDONLY, false: os.O_WRONLY}[i == 0], 0)
			if err != nil {
				return req, nil, closeAfter, err
			}
			closeAfter = append(closeAfter, null)
			files = append(files, null)
		case *os.File:
			files = append(files, f)
		default:
			return req, nil, closeAfter, fmt.Errorf("the spawner's child's standard stream %d is not a file", i)
		}
	}
	for _, f := range cmd.ExtraFiles {
		if f == nil {
			return req, nil, closeAfter, errors.New("the spawner's child cannot have a closed descriptor among its files")
		}
		files = append(files, f)
	}
	if len(files) > maxSpawnFiles {
		return req, nil, closeAfter, fmt.Errorf("%d files: the spawner passes at most %d", len(files), maxSpawnFiles)
	}
	return spawnRequest{
		Path: cmd.Path, Argv: cmd.Args, Env: cmd.Env, Dir: cmd.Dir,
		Cloneflags: a.Cloneflags, UIDMappings: a.UidMappings, GIDMappings: a.GidMappings,
		Setgroups: a.GidMappingsEnableSetgroups, Credential: a.Credential, AmbientCaps: a.AmbientCaps,
		Setpgid: a.Setpgid,
	}, files, closeAfter, nil
}

// runSpawner is the spawner's whole work: it starts what each request on its socket asks, as
// its parent's child, and answers with the PID, until the socket ends.
func runSpawner() int {
	conn, err := net.FileConn(os.NewFile(spawnerFD, "spawner"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "nbkube spawner: %v\n", err)
		return 1
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		fmt.Fprintln(os.Stderr, "nbkube spawner: descriptor 3 is not a Unix socket")
		return 1
	}
	buf := make([]byte, maxSpawnRequest)
	oob := make([]byte, unix.CmsgSpace(maxSpawnFiles*4))
	for {
		n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 {
			return 0
		}
		fds, reply := receivedFiles(oob[:oobn])
		if reply.Error == "" && flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
			reply.Error = "the request is too large"
		}
		if reply.Error == "" {
			reply = spawn(buf[:n], fds)
		}
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		b, _ := json.Marshal(reply)
		if _, err := uc.Write(b); err != nil {
			return 0
		}
	}
}

// receivedFiles are the descriptors that came with a request.
func receivedFiles(oob []byte) ([]int, spawnReply) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, spawnReply{Error: fmt.Sprintf("the request's files: %v", err)}
	}
	var fds []int
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, fd := range got {
			unix.CloseOnExec(fd)
		}
		fds = append(fds, got...)
	}
	return fds, spawnReply{}
}

// spawn starts what req asks, with fds as its descriptors from 0 on.
func spawn(req []byte, fds []int) spawnReply {
	var r spawnRequest
	if err := json.Unmarshal(req, &r); err != nil {
		return spawnReply{Error: fmt.Sprintf("the request: %v", err)}
	}
	files := make([]uintptr, len(fds))
	for i, fd := range fds {
		files[i] = uintptr(fd)
	}
	pid, err := syscall.ForkExec(r.Path, r.Argv, &syscall.ProcAttr{
		Dir: r.Dir, Env: r.Env, Files: files,
		Sys: &syscall.SysProcAttr{
			// The child is the caller's, not the spawner's. A failure between the fork and
			// the exec leaves it to the caller as a zombie it does not know of: such a
			// failure (a map the kernel refuses, an init that cannot be executed) shows at
			// the node's start, in its check of the sandbox, not with each pod.
			Cloneflags:  r.Cloneflags | unix.CLONE_PARENT,
			UidMappings: r.UIDMappings, GidMappings: r.GIDMappings,
			GidMappingsEnableSetgroups: r.Setgroups,
			Credential:                 r.Credential,
			AmbientCaps:                r.AmbientCaps,
			Setpgid:                    r.Setpgid,
		},
	})
	if err != nil {
		return spawnReply{Error: (&os.PathError{Op: "fork/exec", Path: r.Path, Err: err}).Error()}
	}
	return spawnReply{PID: pid}
}
