package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// sandboxProbe is run in ben's kernel after ARGS is set: what it can read and connect to on
// the machine, as JSON. ARGS has ann's home and the volume's root by their host paths,
// nbkube's data directory and files in it, and the addresses of ann's agent, the control
// plane and nbkube's API.
const sandboxProbe = `
import http.client, json, os, socket, urllib.parse
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
def proxied(addr):
    # Through the node's egress proxy, which the environment names.
    p = urllib.parse.urlsplit(os.environ.get("HTTP_PROXY", ""))
    if not p.hostname:
        return False
    c = http.client.HTTPConnection(p.hostname, p.port, timeout=5)
    try:
        c.request("GET", "http://%s/" % addr)
        return c.getresponse().status != 403
    except OSError:
        return False
def in_pod_pids():
    # /proc/self names this process only in the PID namespace of the sandbox's /proc.
    try:
        return os.readlink("/proc/self") == str(os.getpid())
    except OSError:
        return False
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
    "annAgentByProxy": proxied(ARGS["annAgent"]), "controlPlaneByProxy": proxied(ARGS["controlPlane"]),
    "apiByProxy": proxied(ARGS["api"]), "proxy": os.environ.get("HTTPS_PROXY", ""),
    "processes": len(pids), "nbkubeSeen": any("nbkube local" in c for c in cmdlines),
    "cwd": os.getcwd(), "mine": open("mine.txt").read(), "uid": os.getuid(),
    "inPodPIDs": in_pod_pids(),
}))
`

// TestSandbox_KernelsOfUsersAreIsolated runs `nbkube local` with users ann and ben, which
// sandboxes their pods: from ben's kernel, ann's home, the volume, nbkube's data (kubeconfig, cookie secret),
// other processes, ann's agent, the control plane and nbkube's own API are out of reach,
// while his own home works as before.
func TestSandbox_KernelsOfUsersAreIsolated(t *testing.T) {
	inst, as, dataDir, root := startSandboxedUsers(t)
	base := as("ann").base

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
	if run := annChannels.run("secret = 'ann-only'; open('notes.txt', 'w').write('ann'); print(2 + 2)"); run.Stdout.String() != "4\n" {
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
		AnnAgentByProxy, ControlPlaneByProxy, APIByProxy bool
		Proxy                                            string
		Processes                                        int
		NbkubeSeen, InPodPIDs                            bool
		Cwd, Mine                                        string
	}
	if err := json.Unmarshal([]byte(run.Stdout.String()), &got); err != nil {
		t.Fatalf("ben's probe: %v; %s", err, run)
	}
	for what, seen := range map[string]bool{
		"ann's home": got.AnnHome, "the volume's root": got.Root, "nbkube's data directory": got.DataDir,
		"the admin kubeconfig": got.Kubeconfig, "the cookie secret": got.CookieSecret,
		"ann's agent": got.AnnAgent, "the control plane": got.ControlPlane, "nbkube's API": got.API,
		"nbkube's process": got.NbkubeSeen, "ann's agent through the egress proxy": got.AnnAgentByProxy,
		"the control plane through the egress proxy": got.ControlPlaneByProxy, "nbkube's API through the egress proxy": got.APIByProxy,
	} {
		if seen {
			t.Errorf("ben's kernel reaches %s: %s", what, run.Stdout.String())
		}
	}
	if got.Proxy == "" {
		t.Errorf("ben's kernel has no egress proxy in its environment: %s", run.Stdout.String())
	}
	if got.Processes > 8 {
		t.Errorf("ben's kernel sees %d processes, want only its pod's", got.Processes)
	}
	// The fork server forks it into the pod's PID namespace, whose /proc the sandbox has.
	if !got.InPodPIDs {
		t.Errorf("ben's kernel is not in its pod's PID namespace: %s", run.Stdout.String())
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
	if run := annChannels.run("print(secret)"); run.Stdout.String() != "ann-only\n" {
		t.Errorf("ann's kernel: %s", run)
	}
	// Under root each kernel runs as a user of the machine of its own: its user namespace
	// maps its user to that one, neither root nor the other kernel's.
	if os.Geteuid() == 0 {
		// Its user inside, and the user of the machine that is.
		const ids = "import os; print(os.getuid(), os.getgid(), open('/proc/self/uid_map').read().split()[1])"
		annIDs, benIDs := strings.Fields(annChannels.run(ids).Stdout.String()), strings.Fields(ben.run(ids).Stdout.String())
		if len(annIDs) != 3 || len(benIDs) != 3 || annIDs[0] != "1000" || benIDs[0] != "1000" || annIDs[1] == "65534" || benIDs[1] == "65534" ||
			annIDs[2] == "0" || benIDs[2] == "0" || annIDs[2] == benIDs[2] {
			t.Errorf("ann's kernel runs as (uid gid machine's uid) %q, ben's as %q: want 1000 inside, two users of their own outside", annIDs, benIDs)
		}
	}
	// And the node's fork server forked them into their sandboxes, as it does for one user.
	for u, k := range kernels {
		if !inst.kernelForked(t, k) {
			t.Errorf("%s's kernel was not forked by the node's fork server", u)
		}
	}
}

// reachScript is Python that tries a TCP connection to each of targets (host:port) and prints
// those it reached as a JSON list.
func reachScript(t *testing.T, targets []string) string {
	t.Helper()
	probe, err := json.Marshal(targets)
	if err != nil {
		t.Fatal(err)
	}
	return `import json, socket
reached = []
for addr in json.loads(` + strconv.Quote(string(probe)) + `):
    host, port = addr.rsplit(":", 1)
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((host, int(port))); reached.append(addr)
    except OSError:
        pass
    finally:
        s.close()
print(json.dumps(reached))`
}

// startSandboxedUsers runs `nbkube local` with users ann and ben from a users file and
// --sandbox left to its default, which sandboxes pods as soon as a provider knows several
// users, with the flags args besides; as is the API as one of them.
func startSandboxedUsers(t *testing.T, args ...string) (inst *instance, as func(user string) *jupyterAPI, dataDir, root string) {
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
	dataDir, root = t.TempDir(), t.TempDir()
	inst = startLocal(t, dataDir, root, append([]string{"--auth=users,token", "--users-file=" + usersFile, "--user-home={username}"}, args...)...)
	base := inst.api(t).base
	return inst, func(user string) *jupyterAPI { return newJupyterAPI(base, tokens[user], 2*time.Minute) }, dataDir, root
}

// TestSandbox_ClustersServeTheirOwnersKernelsOnly runs ann's ipyparallel cluster on a node
// that sandboxes pods: her kernel and her engines reach her ipcontroller through the node's
// pod network, as the NetworkPolicies allow; ben's kernel reaches neither it nor them.
func TestSandbox_ClustersServeTheirOwnersKernelsOnly(t *testing.T) {
	inst, as, _, _ := startSandboxedUsers(t)
	ann := as("ann")
	c := &nbv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "par"},
		Spec: nbv1.ClusterParameters{Owner: "ann", State: nbv1.ClusterStopped, Engines: 2}}
	if err := inst.client.Create(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "ann's cluster listed", 10*time.Second, func() error {
		var list []clusterModel
		ann.call(t, http.MethodGet, "api/clusters", nil).want(t, http.StatusOK).decode(t, &list)
		if len(list) != 1 || list[0].Profile != "par" {
			return fmt.Errorf("GET /api/clusters as ann: %+v", list)
		}
		return nil
	})
	ann.call(t, http.MethodPost, "api/clusters/par/start", nil).want(t, http.StatusOK)
	waitEngines(t, ann, "api/clusters/par", 2)

	var s sessionModel
	ann.call(t, http.MethodPost, "api/sessions", map[string]any{"path": "par.ipynb", "type": "notebook", "name": "par.ipynb",
		"kernel": map[string]any{"name": "python3"}, "cluster": "par"}).want(t, http.StatusCreated).decode(t, &s)
	inst.readyKernel(t, s.Kernel.ID)
	ws := dialJupyterWS(t, ann, "api/kernels/"+s.Kernel.ID+"/channels", "")
	defer ws.close()
	// Each engine's sandbox has its own PID namespace and its pod's name as the host name.
	if got, e := mapOnEngines(t, ws, 2); got != "2 [0, 1, 4, 9]" {
		t.Fatalf("ann's parallel map from her sandboxed kernel: %q (stderr %q)", got, e.Stderr.String())
	}

	var pods corev1.PodList
	if err := inst.client.List(t.Context(), &pods, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, p := range pods.Items {
		switch p.Labels[nbv1.LabelComponent] {
		case "ipcontroller":
			targets = append(targets, net.JoinHostPort(p.Status.PodIP, "10101"), net.JoinHostPort(p.Status.PodIP, "10105"))
		case "ipengine":
			targets = append(targets, net.JoinHostPort(p.Status.PodIP, strconv.Itoa(agentapi.Port)))
		}
	}
	if len(targets) != 4 {
		t.Fatalf("ann's cluster's addresses: %v", targets)
	}
	var k struct {
		ID string `json:"id"`
	}
	as("ben").call(t, http.MethodPost, "api/kernels", map[string]any{"name": "python3"}).want(t, http.StatusCreated).decode(t, &k)
	ben := dialJupyterWS(t, as("ben"), "api/kernels/"+k.ID+"/channels", randomID())
	defer ben.close()
	if err := ben.awaitKernelInfo(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	run := ben.run(reachScript(t, targets))
	if got := strings.TrimSpace(run.Stdout.String()); got != "[]" {
		t.Errorf("ben's kernel reaches ann's cluster at %s (%s)", got, run)
	}
	// The same check from ann's kernel reaches her ipcontroller: the probe can succeed.
	e := runCell(t, ws, `import socket
s = socket.create_connection((`+strconv.Quote(strings.Split(targets[0], ":")[0])+`, 10101), timeout=2); s.close(); print("reached")`)
	if got := strings.TrimSpace(e.Stdout.String()); got != "reached" {
		t.Errorf("ann's kernel does not reach her ipcontroller: %q (stderr %q)", got, e.Stderr.String())
	}
}
