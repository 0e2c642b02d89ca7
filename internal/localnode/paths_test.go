package localnode

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func testMounts(t *testing.T) mountTable {
	t.Helper()
	c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{
		{Name: "home", MountPath: "/home/jovyan"},
		{Name: "contents", MountPath: "/home/jovyan/work/"},
		{Name: "config", MountPath: "/etc/app/app.conf", SubPath: "app.conf"},
		{Name: "data", MountPath: "/data", SubPathExpr: "users/$(USER)"},
	}}
	dirs := map[string]string{"home": "/pods/p/volumes/home", "contents": "/srv/notebooks", "config": "/pods/p/volumes/config", "data": "/pvc/data"}
	env := func(name string) (string, bool) {
		if name == "USER" {
			return "ada", true
		}
		return "", false
	}
	tbl, err := newMountTable(c, dirs, env)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func TestMountTable_TranslatesByLongestWholeComponentPrefix(t *testing.T) {
	tbl := testMounts(t)
	tests := []struct {
		in, want string
		ok       bool
	}{
		{in: "/home/jovyan", want: "/pods/p/volumes/home", ok: true},
		{in: "/home/jovyan/.local/bin", want: "/pods/p/volumes/home/.local/bin", ok: true},
		{in: "/home/jovyan/work", want: "/srv/notebooks", ok: true},
		{in: "/home/jovyan/work/a.ipynb", want: "/srv/notebooks/a.ipynb", ok: true},
		{in: "/home/jovyanx", want: "/home/jovyanx", ok: false},
		{in: "/etc/app/app.conf", want: "/pods/p/volumes/config/app.conf", ok: true},
		{in: "/data/x", want: "/pvc/data/users/ada/x", ok: true},
		{in: "/database", want: "/database", ok: false},
		{in: "relative/data", want: "relative/data", ok: false},
	}
	for _, tt := range tests {
		got, ok := tbl.translate(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("translate(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestMountTable_RewritesPathsOptionValuesAndPathLists(t *testing.T) {
	tbl := testMounts(t)
	tests := []struct{ in, want string }{
		{in: "/home/jovyan/work", want: "/srv/notebooks"},
		{in: "--notebook-dir=/home/jovyan/work", want: "--notebook-dir=/srv/notebooks"},
		{in: "-f=/data/conn.json", want: "-f=/pvc/data/users/ada/conn.json"},
		{in: "/data/lib:/usr/lib/python3:/home/jovyan/work", want: "/pvc/data/users/ada/lib:/usr/lib/python3:/srv/notebooks"},
		{in: "/data/odd:name", want: "/pvc/data/users/ada/odd:name"},
		{in: "print('/data/x')", want: "print('/data/x')"},
		{in: "http://host/data", want: "http://host/data"},
		{in: "KEY=/data/x", want: "KEY=/data/x"},
	}
	for _, tt := range tests {
		if got := tbl.rewrite(tt.in); got != tt.want {
			t.Errorf("rewrite(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestResolveCommand_MapsCommandArgsAndWorkingDirToTheHost(t *testing.T) {
	tbl := testMounts(t)
	host := hostResolver{
		self: "/opt/nbkube/bin/nbkube",
		lookPath: func(file string) (string, error) {
			switch file {
			case "python3":
				return "/usr/bin/python3", nil
			case "nbkube-agent":
				return "/usr/local/bin/nbkube-agent", nil
			}
			return "", errors.New("executable file not found in $PATH")
		},
		exists: func(p string) bool { return p == "/bin/sh" || p == "/opt/nbkube/bin/nbkube-agent" },
	}
	env := func(name string) (string, bool) {
		if name == "PORT" {
			return "8888", true
		}
		return "", false
	}
	tests := []struct {
		name    string
		c       corev1.Container
		host    *hostResolver // when not the one above
		want    hostCommand
		wantErr string
	}{{
		name: "nbkube by base name runs this binary",
		c:    corev1.Container{Command: []string{"/nbkube/nbkube", "agent"}, Args: []string{"--", "python3", "-m", "ipykernel", "-f", "/data/k.json"}},
		want: hostCommand{path: "/opt/nbkube/bin/nbkube", argv: []string{"/opt/nbkube/bin/nbkube", "agent", "--", "python3", "-m", "ipykernel", "-f", "/pvc/data/users/ada/k.json"}, dir: "/pods/p"},
	}, {
		name: "an image path is looked up on the host PATH, args expanded",
		c:    corev1.Container{Command: []string{"/usr/local/bin/python3"}, Args: []string{"-m", "http.server", "$(PORT)", "$(UNKNOWN)"}},
		want: hostCommand{path: "/usr/bin/python3", argv: []string{"/usr/bin/python3", "-m", "http.server", "8888", "$(UNKNOWN)"}, dir: "/pods/p"},
	}, {
		name: "an existing absolute host path is kept",
		c:    corev1.Container{Command: []string{"/bin/sh", "-c", "true"}, WorkingDir: "/home/jovyan/work"},
		want: hostCommand{path: "/bin/sh", argv: []string{"/bin/sh", "-c", "true"}, dir: "/srv/notebooks"},
	}, {
		name: "a command under a mount runs from the volume",
		c:    corev1.Container{Command: []string{"/home/jovyan/.local/bin/tool"}},
		want: hostCommand{path: "/pods/p/volumes/home/.local/bin/tool", argv: []string{"/pods/p/volumes/home/.local/bin/tool"}, dir: "/pods/p"},
	}, {
		name: "a relative path is relative to the working directory",
		c:    corev1.Container{Command: []string{"./run.sh"}, WorkingDir: "/data"},
		want: hostCommand{path: "/pvc/data/users/ada/run.sh", argv: []string{"/pvc/data/users/ada/run.sh"}, dir: "/pvc/data/users/ada"},
	}, {
		name: "nbkube-agent is the one beside nbkube, before the one on PATH",
		c:    corev1.Container{Command: []string{"/usr/local/bin/nbkube-agent", "install", "/x"}},
		want: hostCommand{path: "/opt/nbkube/bin/nbkube-agent", argv: []string{"/opt/nbkube/bin/nbkube-agent", "install", "/x"}, dir: "/pods/p"},
	}, {
		name: "nbkube-agent on the host's PATH when none is beside nbkube",
		c:    corev1.Container{Command: []string{"/usr/local/bin/nbkube-agent", "install", "/x"}},
		host: &hostResolver{self: "/go/bin/nbkube", lookPath: func(file string) (string, error) {
			if file == "nbkube-agent" {
				return "/home/ada/go/bin/nbkube-agent", nil
			}
			return "", errors.New("executable file not found in $PATH")
		}, exists: func(string) bool { return false }},
		want: hostCommand{path: "/home/ada/go/bin/nbkube-agent", argv: []string{"/home/ada/go/bin/nbkube-agent", "install", "/x"}, dir: "/pods/p"},
	}, {
		name:    "a command the host lacks",
		c:       corev1.Container{Command: []string{"/usr/bin/ruby"}},
		wantErr: `"ruby" is not on the host's PATH`,
	}, {
		name:    "no command",
		c:       corev1.Container{Name: "main", Args: []string{"x"}},
		wantErr: "container main has no command",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := host
			if tt.host != nil {
				h = *tt.host
			}
			got, err := resolveCommand(&tt.c, tbl, env, "/pods/p", h)
			if endsInError(t, err, tt.wantErr) {
				return
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(hostCommand{})); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewMountTable_RejectsSubPathsLeavingTheVolume(t *testing.T) {
	c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/x", SubPath: "../etc"}}}
	if _, err := newMountTable(c, map[string]string{"v": "/vol"}, nil); err == nil {
		t.Fatal("a subPath with .. was accepted")
	}
}

func TestSandboxInit_PrefersTheSmallestProgramBesideNbkube(t *testing.T) {
	for _, tt := range []struct {
		beside []string
		want   string
	}{
		{[]string{"nbkube-pod-init", "nbkube-agent"}, "/opt/nbkube/bin/nbkube-pod-init"},
		{[]string{"nbkube-agent"}, "/opt/nbkube/bin/nbkube-agent"},
		{nil, "/opt/nbkube/bin/nbkube"},
	} {
		n := &Node{cfg: Config{SelfExecutable: "/opt/nbkube/bin/nbkube"}, resolver: hostResolver{
			exists: func(p string) bool {
				return slices.ContainsFunc(tt.beside, func(b string) bool { return p == "/opt/nbkube/bin/"+b })
			},
		}}
		if got := n.sandboxInit(); got != tt.want {
			t.Errorf("with %v beside nbkube, the sandboxes' init is %s, want %s", tt.beside, got, tt.want)
		}
	}
}
