package localnode

import (
	"fmt"
	"path"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nbkube/nbkube/internal/agentapi"
)

// selfName is the base name of a command that means "the nbkube binary": pods built for the
// nbkube image run the binary that hosts this node instead.
const selfName = "nbkube"

// agentName is the kernel agent's binary in the nbkube image, found beside the nbkube binary.
const agentName = agentapi.BinaryName

// podInitName is the program of the sandboxes' init (cmd/nbkube-pod-init).
const podInitName = "nbkube-pod-init"

// mount is one volumeMount of a container: the path the container expects and the host path
// behind it.
type mount struct {
	containerPath string
	hostPath      string
	// subPath is set when the mount shows a subdirectory of its volume, which the kubelet
	// creates when it is missing.
	subPath bool
	// readOnly: the container may not write there (enforced in a sandbox only).
	readOnly bool
}

// mountTable holds a container's mounts, longest container path first, so that the first match
// is the longest prefix (a volume mounted inside another one wins over the outer one).
type mountTable []mount

// newMountTable maps each of the container's volumeMounts to the host directory of its volume
// (volumeDirs, by volume name), honouring subPath and subPathExpr ($(VAR) of the container's
// declared env).
func newMountTable(c *corev1.Container, volumeDirs map[string]string, env func(string) (string, bool)) (mountTable, error) {
	t := make(mountTable, 0, len(c.VolumeMounts))
	for _, vm := range c.VolumeMounts {
		dir, ok := volumeDirs[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s refers to no volume of the pod", vm.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr, env)
		}
		m := mount{containerPath: path.Clean(vm.MountPath), hostPath: dir, readOnly: vm.ReadOnly}
		if sub != "" {
			if !filepath.IsLocal(sub) {
				return nil, fmt.Errorf("volumeMount %s: subPath %q must be a relative path inside the volume", vm.Name, sub)
			}
			m.hostPath, m.subPath = filepath.Join(dir, sub), true
		}
		t = append(t, m)
	}
	sort.SliceStable(t, func(i, j int) bool { return len(t[i].containerPath) > len(t[j].containerPath) })
	return t, nil
}

// translate maps an absolute container path to the host path behind the mount it falls under,
// matching whole path components ("/data" covers "/data/x" but not "/database").
func (t mountTable) translate(p string) (string, bool) {
	if !strings.HasPrefix(p, "/") {
		return p, false
	}
	for _, m := range t {
		if m.containerPath == "/" {
			return filepath.Join(m.hostPath, p), true
		}
		if p == m.containerPath {
			return m.hostPath, true
		}
		if rest, ok := strings.CutPrefix(p, m.containerPath); ok && rest[0] == '/' {
			return m.hostPath + rest, true
		}
	}
	return p, false
}

// rewrite translates an argument or env value that names container paths: an absolute path, the
// value of an option (--notebook-dir=/home/jovyan/work), or a list of absolute paths
// (PYTHONPATH=/opt/lib:/work). Anything else is returned unchanged.
func (t mountTable) rewrite(v string) string {
	if name, val, ok := strings.Cut(v, "="); ok && strings.HasPrefix(name, "-") && !strings.Contains(name, "/") {
		return name + "=" + t.rewritePaths(val)
	}
	return t.rewritePaths(v)
}

func (t mountTable) rewritePaths(v string) string {
	if !strings.HasPrefix(v, "/") {
		return v
	}
	if parts := strings.Split(v, ":"); len(parts) > 1 {
		for _, p := range parts {
			if !strings.HasPrefix(p, "/") {
				return t.rewritePath(v)
			}
		}
		for i, p := range parts {
			parts[i] = t.rewritePath(p)
		}
		return strings.Join(parts, ":")
	}
	return t.rewritePath(v)
}

func (t mountTable) rewritePath(p string) string {
	hp, _ := t.translate(p)
	return hp
}

// hostCommand is a container's command line as the host runs it.
type hostCommand struct {
	path string   // the executable
	argv []string // argv[0] is path
	dir  string   // working directory
}

// hostResolver is how command resolution sees the host; tests replace it.
type hostResolver struct {
	self     string // the nbkube binary
	lookPath func(file string) (string, error)
	exists   func(path string) bool
}

// resolveCommand turns a container's command and args into a host command line: $(VAR)
// references are expanded with the container's declared env (as the kubelet does), paths under
// volume mounts are rewritten, and command[0] resolves to the nbkube binary (base name "nbkube"),
// a path under a mount, nbkube-agent (beside nbkube, else on the host's PATH), an absolute host
// path that exists, a path relative to the working directory, or else its base name on the
// host's PATH. The working directory is workingDir translated, or the pod's own directory when
// unset.
func resolveCommand(c *corev1.Container, t mountTable, env func(string) (string, bool), podDir string, h hostResolver) (hostCommand, error) {
	if len(c.Command) == 0 {
		return hostCommand{}, fmt.Errorf("container %s has no command", c.Name)
	}
	words := make([]string, 0, len(c.Command)+len(c.Args))
	for _, w := range append(append([]string{}, c.Command...), c.Args...) {
		words = append(words, expand(w, env))
	}
	dir := podDir
	if c.WorkingDir != "" {
		dir, _ = t.translate(c.WorkingDir)
	}

	cmd0 := words[0]
	var exe string
	switch hp, underMount := t.translate(cmd0); {
	case filepath.Base(cmd0) == selfName:
		exe = h.self
	case underMount:
		exe = hp
	case filepath.Base(cmd0) == agentName:
		// The agent of the nbkube image: the one beside this nbkube, else the host's.
		exe = filepath.Join(filepath.Dir(h.self), agentName)
		if !h.exists(exe) {
			if p, err := h.lookPath(agentName); err == nil {
				exe = p
			}
		}
	case filepath.IsAbs(cmd0) && h.exists(cmd0):
		exe = cmd0
	case !filepath.IsAbs(cmd0) && strings.Contains(cmd0, "/"):
		exe = filepath.Join(dir, cmd0)
	default:
		p, err := h.lookPath(filepath.Base(cmd0))
		if err != nil {
			return hostCommand{}, fmt.Errorf("command %q is under no volume mount and %q is not on the host's PATH: %w", cmd0, filepath.Base(cmd0), err)
		}
		exe = p
	}

	argv := make([]string, len(words))
	argv[0] = exe
	for i, w := range words[1:] {
		argv[i+1] = t.rewrite(w)
	}
	return hostCommand{path: exe, argv: argv, dir: dir}, nil
}
