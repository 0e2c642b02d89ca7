package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// sandboxProbe is run in ben's kernel after ARGS is set: what it can read and connect to on
// the machine, as JSON. ARGS has ann's home and the volume's root by their host paths,
// nbkube's data directory and files in it, and the addresses of ann's agent, the control
// plane and nbkube's API.
const sandboxProbe = `
import json, os, socket
def readable(p):
    try:
        if os.path.isdir(p):
            os.listdir(p)
        else:
            open(p, "rb").read(1)
        return True
    except OSError:
        return False
def reachable(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((host, int(port)))
        return True
    except OSError:
        return False
    finally:
        s.close()
pids = [p for p in os.listdir("/proc") if p.isdigit()]
cmdlines = []
for p in pids:
    try:
        cmdlines.append(open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode())
    except OSError:
        pass
open("mine.txt", "w").write("ben's")
print(json.dumps({
    "annHome": readable(ARGS["annHome"]), "root": readable(ARGS["root"]),
    "dataDir": readable(ARGS["dataDir"]), "kubeconfig": readable(ARGS["kubeconfig"]),
    "cookieSecret": readable(ARGS["cookieSecret"]), "annAgent": reachable(ARGS["annAgent"]),
    "controlPlane": reachable(ARGS["controlPlane"]), "api": reachable(ARGS["api"]),
    "processes": len(pids), "nbkubeSeen": any("nbkube local" in c for c in cmdlines),
    "cwd": os.getcwd(), "mine": open("mine.txt").read(), "uid": os.getuid(),
}))
`

// TestSandbox_KernelsOfUsersAreIsolated runs `nbkube local --sandbox` with users ann and
// ben: from ben's kernel, ann's home, the volume, nbkube's data (kubeconfig, cookie secret),
// other processes, ann's agent, the control plane and nbkube's own API are out of reach,
// while his own home works as before.
func TestSandbox_KernelsOfUsersAreIsolated(t *testing.T) {
	tokens := map[string]string{}
	var file strings.Builder
	file.WriteString("users:\n")
	for _, u := range []string{"ann", "ben"} {
		tok, err := identity.NewUserToken(u)
		if err != nil {
			t.Fatal(err)
		}
		h, err := identity.HashSecret(tok)
		if err != nil {
			t.Fatal(err)
		}
		tokens[u] = tok
		fmt.Fprintf(&file, "- name: %s\n  token_hash: %q\n", u, h)
	}
	usersFile := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(usersFile, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir, root := t.TempDir(), t.TempDir()
	inst := startLocalCmd(t, exec.Command(nbkubeBin, "local", "--data-dir", dataDir, "--root", root, "--kube-bin-dir", testenv.KubeBinDir(),
		"--listen", "127.0.0.1:0", "--auth=users,token", "--users-file="+usersFile, "--user-home={username}", "--sandbox"), dataDir, root)
	base := inst.api(t).base
	as := func(user string) *jupyterAPI { return newJupyterAPI(base, tokens[user], 2*time.Minute) }

	kernels := map[string]string{}
	for _, u := range []string{"ann", "ben"} {
		var k struct {
			ID string `json:"id"`
		}
		as(u).call(t, http.MethodPost, "api/kernels", map[string]any{"name": "python3"}).want(t, http.StatusCreated).decode(t, &k)
		kernels[u] = k.ID
	}
	annChannels := dialJupyterWS(t, as("ann"), "api/kernels/"+kernels["ann"]+"/channels", randomID())
	if err := annChannels.awaitKernelInfo(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if run := annChannels.run("secret = 'ann-only'; open('notes.txt', 'w').write('ann'); print(2 + 2)"); run.stdout.String() != "4\n" {
		t.Fatalf("ann's kernel: %s", run)
	}
	defer annChannels.close()

	annPod := &corev1.Pod{}
	if err := inst.client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: kernels["ann"]}, annPod); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dataDir, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	args, err := json.Marshal(map[string]string{
		"annHome": filepath.Join(root, "ann"), "root": root, "dataDir": dataDir, "kubeconfig": kubeconfig,
		"cookieSecret": filepath.Join(dataDir, "cookie_secret"), "annAgent": net.JoinHostPort(annPod.Status.PodIP, strconv.Itoa(agentapi.Port)),
		"controlPlane": cp.Host, "api": api.Host,
	})
	if err != nil {
		t.Fatal(err)
	}
	code := "import json\nARGS = json.loads(" + strconv.Quote(string(args)) + ")\n" + sandboxProbe

	ben := dialJupyterWS(t, as("ben"), "api/kernels/"+kernels["ben"]+"/channels", randomID())
	if err := ben.awaitKernelInfo(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	defer ben.close()
	run := ben.run(code)
	var got struct {
		AnnHome, Root, DataDir, Kubeconfig, CookieSecret bool
		AnnAgent, ControlPlane, API                      bool
		Processes                                        int
		NbkubeSeen                                       bool
		Cwd, Mine                                        string
	}
	if err := json.Unmarshal([]byte(run.stdout.String()), &got); err != nil {
		t.Fatalf("ben's probe: %v; %s", err, run)
	}
	for what, seen := range map[string]bool{
		"ann's home": got.AnnHome, "the volume's root": got.Root, "nbkube's data directory": got.DataDir,
		"the admin kubeconfig": got.Kubeconfig, "the cookie secret": got.CookieSecret,
		"ann's agent": got.AnnAgent, "the control plane": got.ControlPlane, "nbkube's API": got.API,
		"nbkube's process": got.NbkubeSeen,
	} {
		if seen {
			t.Errorf("ben's kernel reaches %s: %s", what, run.stdout.String())
		}
	}
	if got.Processes > 8 {
		t.Errorf("ben's kernel sees %d processes, want only its pod's", got.Processes)
	}
	if got.Cwd != "/home/jovyan/work" || got.Mine != "ben's" {
		t.Errorf("ben's kernel works in %q and read back %q", got.Cwd, got.Mine)
	}
	// What ben wrote is in his home on the volume; ann's work is where she left it.
	if b, err := os.ReadFile(filepath.Join(root, "ben", "mine.txt")); err != nil || string(b) != "ben's" {
		t.Errorf("ben's file on the volume: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "ann", "notes.txt")); err != nil || string(b) != "ann" {
		t.Errorf("ann's file on the volume: %q, %v", b, err)
	}
	// ann's kernel still has its state: nothing from ben reached it.
	if run := annChannels.run("print(secret)"); run.stdout.String() != "ann-only\n" {
		t.Errorf("ann's kernel: %s", run)
	}
}
