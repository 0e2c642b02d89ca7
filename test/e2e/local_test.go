// Package e2e drives nbkube as a user does: it builds the binary, runs `nbkube local` (the
// embedded default behind `make run`) with the real control plane and the local node, and
// checks the outcome through the API, kubectl and the processes of this machine.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/jpclient"
	"github.com/nbkube/nbkube/internal/scheme"
	"github.com/nbkube/nbkube/internal/testenv"
)

var nbkubeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nbkube-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nbkubeBin = filepath.Join(dir, "nbkube")
	// Kernel pods run nbkube-agent, which `nbkube install` finds beside nbkube; sandboxes'
	// inits run nbkube-pod-init from there, as `make build` lays them out.
	if err := testenv.BuildCommands(dir, "nbkube", "nbkube-agent", "nbkube-pod-init"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// instance is one running `nbkube local` (testenv.StartLocal) with a client of its cluster.
type instance struct {
	*testenv.Local
	dataDir string
	root    string
	client  client.Client
}

// startLocal starts `nbkube local` on a free port with dataDir, root and the flags args, and
// waits until it is ready.
func startLocal(t *testing.T, dataDir, root string, args ...string) *instance {
	t.Helper()
	return startLocalWith(t, testenv.LocalConfig{Bin: nbkubeBin, DataDir: dataDir, Root: root,
		Args: append([]string{"--listen", "127.0.0.1:0"}, args...)})
}

// startLocalWith starts `nbkube local` as cfg says and waits until it is ready.
func startLocalWith(t *testing.T, cfg testenv.LocalConfig) *instance {
	t.Helper()
	l := testenv.StartLocal(t, cfg)
	return &instance{Local: l, dataDir: cfg.DataDir, root: cfg.Root, client: kubeClient(t, l.Kubeconfig)}
}

// kubeClient is a client of the cluster in the kubeconfig that knows nbkube's kinds.
func kubeClient(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// stop ends the instance the way Ctrl-C does and waits for it.
func (i *instance) stop(t *testing.T) {
	t.Helper()
	if err := i.Stop(); err != nil {
		t.Errorf("nbkube local after Ctrl-C: %v", err)
	}
}

func (i *instance) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.KubeBinDir(), "kubectl"), append([]string{"--kubeconfig", i.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// api is a client of the instance's Jupyter API, at its URL with its token.
func (i *instance) api(testing.TB) *jupyterAPI {
	// Starting a kernel answers once the kernel does.
	return newJupyterAPI(i.URL, i.Token, 2*time.Minute)
}

func (i *instance) readyKernel(t *testing.T, name string) *nbv1.Kernel {
	t.Helper()
	return waitKernelReady(t, i.client, "default", name)
}

func (i *instance) apiServers(t testing.TB) []*jupyterAPI { return []*jupyterAPI{i.api(t)} }

func (i *instance) kube() client.Client { return i.client }

func (i *instance) kernelNamespace() string { return "default" }

// kernelForked tells whether the agent of the named kernel says the node's fork server
// forked its kernel.
func (i *instance) kernelForked(t *testing.T, name string) bool {
	t.Helper()
	forked := false
	i.agentLog(t, name, func(entry map[string]any) {
		if entry["msg"] == "Started kernel" {
			forked = entry["forked"] == true
		}
	})
	return forked
}

// agentLog calls each with every JSON entry that the agent of the named kernel logged.
func (i *instance) agentLog(t *testing.T, name string, each func(map[string]any)) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := i.client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(i.dataDir, "node", "pods", "default_"+name+"_"+string(pod.UID), "logs", "*", "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		for line := range strings.SplitSeq(string(data), "\n") {
			var entry map[string]any
			if json.Unmarshal([]byte(line), &entry) == nil {
				each(entry)
			}
		}
	}
}

// kernelProcess finds the ipykernel process of a kernel below nbkube local, a child of the
// pod's agent or forked by the node's kernel fork server (docs/local.md): the pid the agent
// logged when it started the kernel (a forked kernel's command line is the fork server's).
func (i *instance) kernelProcess(t *testing.T, name string) int {
	t.Helper()
	pid := 0
	i.agentLog(t, name, func(entry map[string]any) {
		if p, ok := entry["pid"].(float64); ok && entry["msg"] == "Started kernel" {
			pid = int(p)
		}
	})
	if pid == 0 || !slices.Contains(testenv.Descendants(i.PID()), pid) {
		t.Fatalf("no kernel process of pod %s under nbkube local (its agent logged pid %d)", name, pid)
	}
	return pid
}

func TestLocal_SamplesRunRealKernelsAndStateSurvivesARestart(t *testing.T) {
	dataDir, root := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "projects"), 0o755); err != nil {
		t.Fatal(err)
	}
	inst := startLocal(t, dataDir, root)
	ctx := context.Background()

	// What the README tells an admin to do.
	inst.kubectl(t, "apply", "-f", "../../config/samples/")
	k := inst.readyKernel(t, "sample-kernel")
	if k.Status.ExecutionState != nbv1.ExecutionStateIdle || !strings.HasPrefix(k.Status.PodIP, "127.0.0.") {
		t.Errorf("kernel status %+v", k.Status)
	}
	out := inst.kubectl(t, "get", "kernels")
	for _, want := range []string{"SPEC", "OWNER", "READY", "STATE", "sample-kernel", "python3", "admin", "True", "idle"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get kernels lacks %q:\n%s", want, out)
		}
	}
	// The kernel is a real ipykernel working in the contents root.
	pid := inst.kernelProcess(t, "sample-kernel")
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || cwd != root {
		t.Errorf("kernel cwd %q (%v), want the contents root %s", cwd, err, root)
	}
	// A kernel of the python3 spec is forked by the node's kernel fork server (docs/local.md).
	var ppid int
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		_, after, _ := strings.Cut(string(stat), ") ")
		if f := strings.Fields(after); len(f) > 1 {
			ppid, _ = strconv.Atoi(f[1])
		}
	}
	if parent, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ppid)); !strings.Contains(string(parent), "forkserver.py") {
		t.Errorf("the kernel's parent %d is %q, want the kernel fork server", ppid, parent)
	}

	// A session's kernel works in the notebook's directory; deleting the session collects its
	// kernel and pod through owner references (kube-controller-manager's garbage collector)
	// and the kernel process with them.
	s := &nbv1.Session{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s-projects"}, Spec: nbv1.SessionParameters{
		Owner: "alice", Path: "projects/analysis.ipynb", Kernel: nbv1.SessionKernel{KernelSpec: "python3"}}}
	if err := inst.client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	inst.readyKernel(t, "s-projects")
	spid := inst.kernelProcess(t, "s-projects")
	if cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", spid)); cwd != filepath.Join(root, "projects") {
		t.Errorf("session kernel cwd %q, want %s", cwd, filepath.Join(root, "projects"))
	}
	// The API server counts the kernels of the cluster.
	var status map[string]any
	inst.api(t).getJSON(t, "api/status", &status)
	if n := status["kernels"]; n != float64(3) {
		t.Errorf("/api/status kernels = %v, want 3", n)
	}
	// One /metrics, with the token, carries the API server's metrics and the controllers'.
	metrics := string(inst.api(t).call(t, http.MethodGet, "metrics", nil).want(t, http.StatusOK).body)
	for _, want := range []string{`kernel_currently_running_total{type="python3"} 3`, `nbkube_kernel_start_duration_seconds_count{kernel_spec="python3"} `} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if err := inst.client.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "session's kernel and pod collected", 60*time.Second, func() error {
		if err := inst.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "s-projects"}, &nbv1.Kernel{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("kernel: %w", err)
		}
		if err := inst.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "s-projects"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("pod: %w", err)
		}
		if testenv.Alive(spid) {
			return fmt.Errorf("kernel process %d still runs", spid)
		}
		return nil
	})

	// Ctrl-C stops everything it started.
	procs := testenv.Descendants(inst.PID())
	if len(procs) < 5 {
		t.Errorf("only %d processes under nbkube local (control plane, agents, kernels expected)", len(procs))
	}
	inst.stop(t)
	for _, p := range procs {
		if testenv.Alive(p) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			t.Errorf("process %d (%s) outlived nbkube local", p, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}

	// A second run finds the state of the first: the resources are still there.
	inst = startLocal(t, dataDir, root)
	out = inst.kubectl(t, "get", "kernels,sessions,kernelspecs", "-o", "name")
	for _, want := range []string{"kernel.nbkube.io/sample-kernel", "session.nbkube.io/sample-session", "kernelspec.nbkube.io/python3", "kernelspec.nbkube.io/python3-debian"} {
		if !strings.Contains(out, want) {
			t.Errorf("after a restart, %s is missing:\n%s", want, out)
		}
	}
	// Its processes did not survive: the kernel from before is reported dead, not ready.
	testenv.Eventually(t, "kernel from before reported dead", 30*time.Second, func() error {
		k := &nbv1.Kernel{}
		if err := inst.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "sample-kernel"}, k); err != nil {
			return err
		}
		if k.Status.ExecutionState != nbv1.ExecutionStateDead || !meta.IsStatusConditionTrue(k.Status.Conditions, nbv1.ConditionFailed) {
			return fmt.Errorf("status %+v", k.Status)
		}
		return nil
	})
	// A restart brings it back, as Jupyter's restart of a dead kernel starts a new process:
	// a new pod under the same id, answering once the restart answers.
	api := inst.api(t)
	var restarted struct {
		ID    string `json:"id"`
		State string `json:"execution_state"`
	}
	api.call(t, http.MethodPost, "api/kernels/sample-kernel/restart", nil).want(t, http.StatusOK).decode(t, &restarted)
	if restarted.ID != "sample-kernel" || restarted.State == string(nbv1.ExecutionStateDead) {
		t.Errorf("restart of the dead kernel answered %+v", restarted)
	}
	ws := dialJupyterWS(t, api, "api/kernels/sample-kernel/channels", "after-death-"+randomID())
	e := jpclient.NewExecution(ws.execute("print(6*7)"))
	ws.await(e, cellTimeout, "the restarted kernel's answer", (*jpclient.Execution).Finished)
	if e.Status() != "ok" || e.Stdout.String() != "42\n" {
		t.Errorf("the restarted kernel ran print(6*7): %s", e)
	}
	ws.close()

	// A new kernel runs on the restarted node.
	k2 := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "after-restart"},
		Spec: nbv1.KernelParameters{Owner: "alice", KernelSpec: "python3"}}
	if err := inst.client.Create(ctx, k2); err != nil {
		t.Fatal(err)
	}
	inst.readyKernel(t, "after-restart")

	// Killed outright, it still takes its children along.
	procs = testenv.Descendants(inst.PID())
	inst.Kill()
	testenv.Eventually(t, "children gone after SIGKILL", 15*time.Second, func() error {
		for _, p := range procs {
			if testenv.Alive(p) {
				return fmt.Errorf("process %d still alive", p)
			}
		}
		return nil
	})
}

func TestLocal_TwoInstancesSideBySide(t *testing.T) {
	a := startLocal(t, t.TempDir(), t.TempDir())
	b := startLocal(t, t.TempDir(), t.TempDir())
	ka := a.kubectl(t, "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
	kb := b.kubectl(t, "config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
	if ka == kb {
		t.Fatalf("both instances serve at %s", ka)
	}
	for _, inst := range []*instance{a, b} {
		k := &nbv1.Kernel{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "k"},
			Spec: nbv1.KernelParameters{Owner: "alice", KernelSpec: "python3"}}
		if err := inst.client.Create(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	ipA := a.readyKernel(t, "k").Status.PodIP
	ipB := b.readyKernel(t, "k").Status.PodIP
	if ipA == ipB {
		t.Errorf("kernels of both instances got pod IP %s", ipA)
	}
	a.stop(t)
	b.stop(t)
}

// waitGone waits until the named resource of the deployment no longer exists.
func waitGone(t testing.TB, d deployment, obj client.Object, name string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%T %s gone", obj, name), goneTimeout, func() error {
		err := d.kube().Get(t.Context(), client.ObjectKey{Namespace: d.kernelNamespace(), Name: name}, obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still there (deletion %v, finalizers %v)", obj.GetDeletionTimestamp(), obj.GetFinalizers())
	})
}

// localUserName is who `nbkube local` makes the token's user: the machine's user.
func localUserName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "nbkube"
}

func tail(b []byte) string {
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
