package podns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Spec is what a sandboxed process is: its command line and the file system it sees.
type Spec struct {
	// Path is the executable as the sandbox sees it; Argv[0] is conventionally Path.
	Path string   `json:"path"`
	Argv []string `json:"argv"`
	// Env is the whole environment of the command.
	Env []string `json:"env"`
	// Dir is the working directory inside the sandbox; "/" when empty.
	Dir string `json:"dir,omitempty"`
	// UID and GID are the command's user and group inside the sandbox, mapped to the user and
	// group that start it, or to Host's.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// Host, when set, is the user and group of the machine that UID and GID are, instead of
	// the starter's own: a pod's own, which no other pod and no file of the machine has.
	// Only root may give it. The volumes are then shown through idmapped mounts, so that the
	// files of the starter's user on them are UID's and GID's inside, and what the sandbox
	// writes there is the starter's on the machine (see NewCommand).
	Host *HostIDs `json:"host,omitempty"`
	// Hostname is the name of the sandbox's UTS namespace, as a pod's is its name.
	Hostname string `json:"hostname,omitempty"`
	// PodIP is the address, inside, at which Control.Dial connects (a server of the pod
	// listens there or on every address); default 127.0.0.1.
	PodIP string `json:"podIP,omitempty"`
	// Root is an empty directory of the host on which the sandbox mounts its root file system;
	// what the sandbox writes there is in memory and never reaches the directory.
	Root string `json:"root"`
	// System lists host paths shown read-only at their own paths (directories, files or
	// symbolic links, which are made again as links); missing ones are left out. Default
	// DefaultSystem.
	System []string `json:"system,omitempty"`
	// Masks lists paths under System hidden from the sandbox: a file shows as empty, a
	// directory as an empty read-only directory. Default DefaultMasks.
	Masks []string `json:"masks,omitempty"`
	// Mounts are the volumes.
	Mounts []Mount `json:"mounts,omitempty"`
	// RouteOut, when set, gives the sandbox a network interface with the default route,
	// whose packets the node answers (routeout.go); without it the sandbox has only its
	// loopback.
	RouteOut *RouteOut `json:"routeOut,omitempty"`
}

// HostIDs are a user and a group of the machine.
type HostIDs struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Mount shows a host directory or file at a path of the sandbox.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// DefaultSystem is what a sandbox sees of the machine besides its volumes: the programs and
// libraries it runs and their configuration, as a container sees its image.
var DefaultSystem = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// DefaultMasks are the secrets of the machine under DefaultSystem. They are readable only by
// root, but the sandbox of an nbkube run by root may run as root's user (without Spec.Host),
// and file permissions would let it read them.
var DefaultMasks = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/ssh", "/etc/ssl/private", "/etc/sudoers", "/etc/sudoers.d",
	"/etc/security/opasswd", "/etc/kubernetes", "/etc/machine-id",
}

// validate checks what the init would otherwise fail on late or do wrong.
func (s *Spec) validate() error {
	if !filepath.IsAbs(s.Path) {
		return fmt.Errorf("the command %q is not an absolute path", s.Path)
	}
	if len(s.Argv) == 0 {
		return errors.New("no argv")
	}
	if !filepath.IsAbs(s.Root) {
		return fmt.Errorf("the root %q is not an absolute path", s.Root)
	}
	if s.Host != nil && s.distinct() && os.Geteuid() != 0 {
		return errors.New("only root may run a sandbox as another user of the machine")
	}
	for _, e := range s.Env {
		if !strings.Contains(e, "=") {
			return fmt.Errorf("environment entry %q is not NAME=value", e)
		}
	}
	for _, m := range s.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Target) {
			return fmt.Errorf("mount %s at %s: both paths must be absolute", m.Source, m.Target)
		}
		if filepath.Clean(m.Target) == "/" {
			return fmt.Errorf("mount %s: a volume cannot replace the root", m.Source)
		}
	}
	return nil
}

// distinct tells whether the sandbox's user is not its starter's on the machine.
func (s *Spec) distinct() bool {
	return s.Host != nil && (int(s.Host.UID) != os.Getuid() || int(s.Host.GID) != os.Getgid())
}

func (s *Spec) withDefaults() {
	if s.System == nil {
		s.System = DefaultSystem
	}
	if s.Masks == nil {
		s.Masks = DefaultMasks
	}
	if s.PodIP == "" {
		s.PodIP = "127.0.0.1"
	}
	if s.Dir == "" {
		s.Dir = "/"
	}
}
