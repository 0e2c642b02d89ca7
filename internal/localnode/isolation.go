package localnode

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	"github.com/nbkube/nbkube/internal/podns"
)

// containerPath is the PATH of a sandboxed container that declares none, as container
// runtimes set it.
const containerPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// sandboxForkServer is where a sandbox finds the node's kernel fork server.
const sandboxForkServer = "/run/nbkube/kernel-fork.sock"

// sandboxSpec is a container's run as a sandbox sees it (see internal/podns): its own paths,
// with volumes at their mount paths, nothing rewritten to the host's.
func (w *podWorker) sandboxSpec(c *container, mounts mountTable, declared []corev1.EnvVar) (podns.Spec, error) {
	env := envLookup(declared)
	words := make([]string, 0, len(c.spec.Command)+len(c.spec.Args))
	for _, s := range append(append([]string{}, c.spec.Command...), c.spec.Args...) {
		words = append(words, expand(s, env))
	}
	if len(words) == 0 {
		return podns.Spec{}, fmt.Errorf("container %s has no command", c.spec.Name)
	}
	dir := c.spec.WorkingDir
	if dir == "" {
		dir = "/"
	}
	spec := podns.Spec{
		Argv:     words,
		Dir:      dir,
		Hostname: w.pod.Name,
		PodIP:    w.ip,
		Root:     filepath.Join(w.podDir, "rootfs", c.spec.Name),
		RouteOut: w.sandboxRouteOut(),
	}
	spec.UID, spec.GID = sandboxIDs(w.pod, c.spec)
	if w.node.ownUsers {
		spec.Host = sandboxHostIDs(w.ip)
	}
	for _, m := range mounts {
		spec.Mounts = append(spec.Mounts, podns.Mount{Source: m.hostPath, Target: m.containerPath, ReadOnly: m.readOnly})
	}
	exe, extra, err := w.sandboxExecutable(words[0], mounts, env, dir)
	if err != nil {
		return podns.Spec{}, err
	}
	spec.Path = exe
	spec.Mounts = append(spec.Mounts, extra...)

	if resolv, at, err := w.resolvConf(); err != nil {
		return podns.Spec{}, err
	} else if resolv != "" {
		spec.Mounts = append(spec.Mounts, podns.Mount{Source: resolv, Target: at, ReadOnly: true})
	}

	host := w.node.hostEnv
	host.path, host.home, host.proxy = containerPath, "/", egressProxyURL
	if host.forkServer != "" {
		// The socket alone, at a path that says nothing of the node's directories.
		spec.Mounts = append(spec.Mounts, podns.Mount{Source: host.forkServer, Target: sandboxForkServer})
		host.forkServer = sandboxForkServer
	}
	spec.Env = processEnv(declared, host, w.pod.Name)
	return spec, nil
}

// sandboxExecutable is where a sandbox finds command[0], and the read-only mounts that show it
// when the node provides it: nbkube itself or an interpreter outside the system directories.
func (w *podWorker) sandboxExecutable(cmd0 string, mounts mountTable, env func(string) (string, bool), dir string) (string, []podns.Mount, error) {
	h := w.node.resolver
	switch _, underMount := mounts.translate(cmd0); {
	case filepath.Base(cmd0) == selfName:
		return h.self, []podns.Mount{{Source: h.self, Target: h.self, ReadOnly: true}}, nil
	case underMount:
		return cmd0, nil, nil
	case filepath.Base(cmd0) == agentName:
		exe := filepath.Join(filepath.Dir(h.self), agentName)
		if !h.exists(exe) {
			p, err := h.lookPath(agentName)
			if err != nil {
				return "", nil, fmt.Errorf("no %s beside %s nor on the host's PATH", agentName, h.self)
			}
			exe = p
		}
		return exe, []podns.Mount{{Source: exe, Target: exe, ReadOnly: true}}, nil
	case filepath.IsAbs(cmd0):
		if !h.exists(cmd0) {
			return "", nil, fmt.Errorf("command %q is under no volume mount and not on this machine", cmd0)
		}
		return cmd0, outsideSystem(cmd0), nil
	case strings.Contains(cmd0, "/"):
		return filepath.Join(dir, cmd0), nil, nil
	}
	path := containerPath
	if v, ok := env("PATH"); ok {
		path = v
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, cmd0)
		if filepath.IsAbs(d) && underSystem(d) && h.exists(p) {
			return p, nil, nil
		}
	}
	return "", nil, fmt.Errorf("command %q is under no volume mount and not in the system's directories of PATH %s", cmd0, path)
}

// underSystem tells whether the sandbox shows host path p as the host has it.
func underSystem(p string) bool {
	for _, s := range podns.DefaultSystem {
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}

// outsideSystem shows an executable the sandbox would not see (a Python of /opt or a home,
// named by a kernel spec) with the installation it belongs to: the directory above its bin/.
func outsideSystem(exe string) []podns.Mount {
	if underSystem(exe) {
		return nil
	}
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		real = exe
	}
	prefix := filepath.Dir(filepath.Dir(real))
	if prefix == "/" {
		prefix = filepath.Dir(real)
	}
	mounts := []podns.Mount{{Source: prefix, Target: prefix, ReadOnly: true}}
	if real != exe {
		mounts = append(mounts, podns.Mount{Source: real, Target: exe, ReadOnly: true})
	}
	return mounts
}

// sandboxIDs are the user and group a container runs as inside its sandbox: its
// securityContext's, or nbkube's own.
func sandboxIDs(pod *corev1.Pod, c *corev1.Container) (uint32, uint32) {
	uid, gid := int64(os.Getuid()), int64(os.Getgid())
	if sc := pod.Spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	return uint32(uid), uint32(gid)
}

// splice copies both ways until both directions ended, passing each end's half-close on.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go copyHalf(a, b)
	go copyHalf(b, a)
	<-done
	<-done
}

// sandboxed tells whether the pod's containers run in sandboxes: on a node that sandboxes,
// every pod but those of the host's network, which share the host's namespaces by definition.
func (w *podWorker) sandboxed() bool {
	return w.node.cfg.Sandbox && !w.pod.Spec.HostNetwork
}

// sandboxInit is the program that runs as a sandbox's init and as the node's spawner:
// nbkube-pod-init beside nbkube, which does nothing else and reaches its init in a few
// milliseconds, else the nbkube-agent beside nbkube, which takes some more (its other
// packages' initialisation runs first), else nbkube itself.
func (n *Node) sandboxInit() string {
	for _, name := range []string{podInitName, agentName} {
		if p := filepath.Join(filepath.Dir(n.cfg.SelfExecutable), name); n.resolver.exists(p) {
			return p
		}
	}
	return n.cfg.SelfExecutable
}

// CheckSandbox tells why this node cannot run pods in sandboxes, if it cannot.
func (n *Node) CheckSandbox() error {
	scratch := filepath.Join(n.cfg.DataDir, "sandbox-check")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	sp := n.spawner
	if sp == nil {
		sp = podns.NewSpawner(n.sandboxInit())
		defer sp.Close()
	}
	return sp.Check(scratch)
}

// The users of the machine that sandboxes run as when nbkube runs as root: a pod's is the
// first plus the lower 24 bits of its IP, which no other pod of the machine holds while it
// runs (addressPool). The range, 0x70000000 to 0x70FFFFFF, lies above those systemd hands to
// users, services and containers (which end at 0x6FFFFFFF), so no file or process of the
// machine has these IDs.
const (
	sandboxIDBase  = 0x7000_0000
	sandboxIDCount = 1 << 24
)

// sandboxHostIDs is the user and group of the machine that the sandbox of the pod at ip runs
// as; nil for an address not from the pool.
func sandboxHostIDs(ip string) *podns.HostIDs {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return nil
	}
	b := a.As4()
	id := uint32(sandboxIDBase) + (uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
	return &podns.HostIDs{UID: id, GID: id}
}

// decideSandboxUsers sets whether the node's sandboxes run as users of the machine of their
// own: when nbkube runs as root (only root may map other users) and the machine can show the
// volumes through idmapped mounts (Linux 5.12, and the file systems of the data directory and
// the claims' directories), which one sandbox and a mount of each claim's directory try. Otherwise every sandbox runs as nbkube's user, and says why in the log.
func (n *Node) decideSandboxUsers(logger logr.Logger) {
	if os.Geteuid() != 0 {
		return
	}
	ids := podns.HostIDs{UID: sandboxIDBase, GID: sandboxIDBase}
	scratch := filepath.Join(n.cfg.DataDir, "sandbox-users-check")
	err := os.MkdirAll(scratch, 0o700)
	if err == nil {
		err = n.spawner.CheckHost(scratch, ids)
		_ = os.RemoveAll(scratch)
	}
	// The claims' directories (the contents root) may be on other file systems.
	for _, dir := range n.cfg.ClaimDirs {
		if err == nil {
			if _, serr := os.Stat(dir); serr == nil {
				err = podns.CheckIdmap(dir, n.sandboxInit(), ids)
			}
		}
	}
	if err != nil {
		logger.Info("Every pod's sandbox runs as nbkube's user on this machine: a user of its own for each needs idmapped mounts of the data directory", "error", err.Error())
		return
	}
	n.ownUsers = true
}

// resolvConf is the file shown in the sandbox at at, the machine's /etc/resolv.conf or where
// that links to (a resolver's file under /run, which the sandbox gets in its own root), which
// names the node's DNS relay inside it (dns.go); "" when the machine has none.
func (w *podWorker) resolvConf() (file, at string, err error) {
	at, err = filepath.EvalSymlinks("/etc/resolv.conf")
	if err != nil {
		return "", "", nil
	}
	file = filepath.Join(w.podDir, "resolv.conf")
	if err := os.WriteFile(file, []byte(sandboxResolvConf), 0o644); err != nil {
		return "", "", fmt.Errorf("writing the sandbox's resolv.conf: %w", err)
	}
	return file, at, nil
}
