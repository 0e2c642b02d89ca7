package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/jpclient"
	"github.com/nbkube/nbkube/internal/testenv"
)

// Timeouts of the kernel tests. The machines that run them are shared, so a kernel start may
// take several seconds; each wait still ends.
const (
	// cellTimeout bounds a short cell, from the request to the reply and idle.
	cellTimeout = 60 * time.Second
	// goneTimeout bounds the removal of a deleted resource (garbage collection included).
	goneTimeout = 60 * time.Second
)

// TestKernels_ThroughLocal drives kernels and sessions as Jupyter clients do, through the API
// and WebSockets of one `nbkube local` (one start for all: each costs seconds), and checks
// the outcome in the Kubernetes resources and the kernel processes: the Jupyter client suite,
// which runs against the chart's release too (TestHelm_InARealCluster), and the cases that
// need this machine's side of nbkube local (a second API server started here, a kernel
// command, the RST service's processes).
func TestKernels_ThroughLocal(t *testing.T) {
	inst := startLocal(t, t.TempDir(), t.TempDir())
	// Cleanups run last first: this one, after every case, before startLocal's.
	t.Cleanup(func() { inst.stop(t) })
	// The suite checks kernel owners against the token's user, which is the machine's here.
	if u := apiUser(t, inst.api(t)); u != localUserName() {
		t.Errorf("the token's user is %s, want the machine's %s", u, localUserName())
	}
	jupyterClientSuite(t, inst,
		clientCase{"KernelsOutliveARestartOfTheAPIServer", func(t *testing.T, _ deployment, _ *jupyterAPI) { testAPIServerRestart(t, inst) }},
		clientCase{"KernelCommandThatFailsIsAClearErrorQuickly", func(t *testing.T, _ deployment, api *jupyterAPI) { testFailingKernel(t, inst, api) }},
		clientCase{"OlderIPythonRSTService", func(t *testing.T, _ deployment, api *jupyterAPI) { testRSTService(t, inst, api) }},
	)
}

// testKernelLifecycle is /api/kernels from start to delete, with the kernel's resource checked
// along the way, and its process where this machine sees it.
func testKernelLifecycle(t *testing.T, d deployment, api *jupyterAPI) {
	ctx := t.Context()
	procs, _ := d.(kernelProcesses)
	resp := api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"})
	resp.want(t, http.StatusCreated)
	var model map[string]any
	resp.decode(t, &model)
	for _, field := range []string{"id", "name", "last_activity", "execution_state", "connections"} {
		if _, ok := model[field]; !ok {
			t.Errorf("kernel model lacks %q: %s", field, resp.body)
		}
	}
	id, _ := model["id"].(string)
	if id == "" || model["name"] != "python3" {
		t.Fatalf("kernel model %s", resp.body)
	}
	if loc := resp.header.Get("Location"); loc != "/api/kernels/"+id {
		t.Errorf("Location %q, want /api/kernels/%s", loc, id)
	}
	if ids := api.kernelIDs(t); !slices.Contains(ids, id) {
		t.Errorf("GET /api/kernels %v lacks %s", ids, id)
	}
	var got map[string]any
	api.call(t, http.MethodGet, "api/kernels/"+id, nil).want(t, http.StatusOK).decode(t, &got)
	if got["id"] != id || got["name"] != "python3" {
		t.Errorf("GET /api/kernels/%s: %v", id, got)
	}

	// The kernel is a Kernel resource of the token's user, as kubectl shows it.
	k := d.readyKernel(t, id)
	if user := apiUser(t, api); string(k.Spec.Owner) != user || k.Spec.KernelSpec != "python3" {
		t.Errorf("Kernel spec %+v, want owner %s and kernel spec python3", k.Spec, user)
	}

	ws := dialJupyterWS(t, api, "api/kernels/"+id+"/channels", "")
	info := jpclient.NewExecution(ws.askKernelInfo())
	ws.await(info, cellTimeout, "kernel_info_request", (*jpclient.Execution).Replied)
	lang, _ := info.Reply["language_info"].(map[string]any)
	if info.ReplyType != "kernel_info_reply" || info.Status() != "ok" || lang["name"] != "python" {
		t.Errorf("kernel_info: %s", info)
	}
	if e := ws.run("1+1"); e.Status() != "ok" || e.Result != "2" {
		t.Errorf("1+1: %s", e)
	}
	pid := kernelPID(t, ws)
	if procs != nil {
		if p := procs.kernelProcess(t, id); p != pid {
			t.Errorf("the kernel reports pid %d, the kernel pod's agent runs ipykernel %d", pid, p)
		}
	}

	// ipykernel turns SIGINT into KeyboardInterrupt only while it executes: the interrupt
	// goes once the cell has printed.
	sleeper := jpclient.NewExecution(ws.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(300)"))
	ws.await(sleeper, cellTimeout, "the sleeping cell's first output", func(e *jpclient.Execution) bool {
		return strings.Contains(e.Stdout.String(), "sleeping")
	})
	api.call(t, http.MethodPost, "api/kernels/"+id+"/interrupt", nil).want(t, http.StatusNoContent)
	ws.await(sleeper, 30*time.Second, "the interrupted cell", (*jpclient.Execution).Finished)
	if sleeper.Status() != "error" || sleeper.ErrorName() != "KeyboardInterrupt" {
		t.Errorf("interrupted cell: %s", sleeper)
	}

	// A restart keeps the kernel's id and connections and forgets its variables.
	if e := ws.run("x = 42"); e.Status() != "ok" {
		t.Fatalf("x = 42: %s", e)
	}
	var restarted map[string]any
	api.call(t, http.MethodPost, "api/kernels/"+id+"/restart", nil).want(t, http.StatusOK).decode(t, &restarted)
	if restarted["id"] != id {
		t.Errorf("restart answered %v, want the same id %s", restarted, id)
	}
	if e := ws.run("x"); e.Ename != "NameError" {
		t.Errorf("x after a restart: %s, want NameError", e)
	}
	newPID := kernelPID(t, ws)
	if newPID == pid {
		t.Errorf("after a restart the kernel is still process %d", pid)
	}
	if procs != nil && testenv.Alive(pid) {
		t.Errorf("after a restart the kernel is process %d; the one before, %d, is alive", newPID, pid)
	}
	// The controller asks the agent for its status every 10 s.
	testenv.Eventually(t, "restartCount 1 on the Kernel", 30*time.Second, func() error {
		if err := d.kube().Get(ctx, client.ObjectKey{Namespace: d.kernelNamespace(), Name: id}, k); err != nil {
			return err
		}
		if k.Status.RestartCount != 1 {
			return fmt.Errorf("restartCount %d", k.Status.RestartCount)
		}
		return nil
	})

	// DELETE answers once the kernel process has exited; clients are disconnected.
	api.call(t, http.MethodDelete, "api/kernels/"+id, nil).want(t, http.StatusNoContent)
	if procs != nil && testenv.Alive(newPID) {
		t.Errorf("kernel process %d still runs after DELETE answered", newPID)
	}
	ws.drain(nil, 30*time.Second)
	api.call(t, http.MethodGet, "api/kernels/"+id, nil).want(t, http.StatusNotFound)
	if ids := api.kernelIDs(t); slices.Contains(ids, id) {
		t.Errorf("GET /api/kernels after DELETE still lists %s", id)
	}
	waitGone(t, d, &nbv1.Kernel{}, id)

	// Errors are Jupyter's JSON errors.
	missing := api.call(t, http.MethodGet, "api/kernels/00000000-0000-4000-8000-000000000000", nil)
	missing.want(t, http.StatusNotFound)
	if e := missing.jupyterError(t); !strings.Contains(e.Message, "00000000-0000-4000-8000-000000000000") {
		t.Errorf("unknown kernel: message %q does not name the kernel", e.Message)
	}
	noSpec := api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "no-such-spec"})
	noSpec.want(t, http.StatusNotFound)
	if e := noSpec.jupyterError(t); !strings.Contains(e.Message, "no-such-spec") {
		t.Errorf("unknown kernel spec: message %q does not name it", e.Message)
	}
	anonymous := api.request(t, http.MethodGet, "api/kernels", nil)
	anonymous.Header.Del("Authorization")
	api.do(t, anonymous).want(t, http.StatusForbidden).jupyterError(t)
}

func testSessions(t *testing.T, d deployment, api *jupyterAPI) {
	body := map[string]any{"path": "sessions.ipynb", "type": "notebook", "name": "sessions.ipynb",
		"kernel": map[string]any{"name": "python3"}}
	resp := api.call(t, http.MethodPost, "api/sessions", body)
	resp.want(t, http.StatusCreated)
	var s sessionModel
	resp.decode(t, &s)
	if s.ID == "" || s.Path != "sessions.ipynb" || s.Name != "sessions.ipynb" || s.Type != "notebook" || s.Kernel == nil || s.Kernel.Name != "python3" {
		t.Fatalf("POST /api/sessions: %s", resp.body)
	}
	if loc := resp.header.Get("Location"); loc != "/api/sessions/"+s.ID {
		t.Errorf("Location %q, want /api/sessions/%s", loc, s.ID)
	}
	firstKernel := s.Kernel.ID
	d.readyKernel(t, firstKernel)

	// A notebook opened again gets its session, not a second one.
	var again sessionModel
	api.call(t, http.MethodPost, "api/sessions", body).want(t, http.StatusCreated).decode(t, &again)
	if again.ID != s.ID || again.Kernel == nil || again.Kernel.ID != firstKernel {
		t.Errorf("the same path again gave session %+v, want %s with kernel %s", again, s.ID, firstKernel)
	}
	if n := len(api.sessionsAt(t, "sessions.ipynb")); n != 1 {
		t.Errorf("GET /api/sessions has %d sessions of sessions.ipynb, want 1", n)
	}
	var got sessionModel
	api.call(t, http.MethodGet, "api/sessions/"+s.ID, nil).want(t, http.StatusOK).decode(t, &got)
	if got.ID != s.ID || got.Kernel == nil || got.Kernel.ID != firstKernel {
		t.Errorf("GET /api/sessions/%s: %+v", s.ID, got)
	}

	// A rename moves the session and keeps its kernel.
	rename := api.call(t, http.MethodPatch, "api/sessions/"+s.ID, map[string]any{"path": "renamed.ipynb", "name": "renamed.ipynb"})
	if rename.status != http.StatusOK {
		// Not fatal: the kernel swap and the delete below are worth checking regardless.
		t.Errorf("PATCH path and name: HTTP %d, want 200: %s", rename.status, rename.body)
	} else {
		var renamed sessionModel
		rename.decode(t, &renamed)
		if renamed.Path != "renamed.ipynb" || renamed.Name != "renamed.ipynb" || renamed.Kernel == nil || renamed.Kernel.ID != firstKernel {
			t.Errorf("PATCH path and name: %+v", renamed)
		}
		api.call(t, http.MethodGet, "api/sessions/"+s.ID, nil).want(t, http.StatusOK).decode(t, &got)
		if got.Path != "renamed.ipynb" {
			t.Errorf("GET after PATCH: path %q", got.Path)
		}
	}

	// Changing the kernel spec starts a new kernel and lets the old one go.
	kernelID := firstKernel
	swap := api.call(t, http.MethodPatch, "api/sessions/"+s.ID, map[string]any{"kernel": map[string]any{"name": "python3"}})
	if swap.status != http.StatusOK {
		// Not fatal: the delete below still has the first kernel to end.
		t.Errorf("PATCH kernel name: HTTP %d, want 200: %s", swap.status, swap.body)
	} else {
		var swapped sessionModel
		swap.decode(t, &swapped)
		if swapped.Kernel == nil || swapped.Kernel.ID == "" || swapped.Kernel.ID == firstKernel {
			t.Fatalf("PATCH kernel name: %+v, want a kernel other than %s", swapped, firstKernel)
		}
		kernelID = swapped.Kernel.ID
		testenv.Eventually(t, "the session's old kernel gone from the API", goneTimeout, func() error {
			if r := api.call(t, http.MethodGet, "api/kernels/"+firstKernel, nil); r.status != http.StatusNotFound {
				return fmt.Errorf("GET /api/kernels/%s: %d", firstKernel, r.status)
			}
			return nil
		})
		waitGone(t, d, &nbv1.Kernel{}, firstKernel)
		api.call(t, http.MethodGet, "api/kernels/"+kernelID, nil).want(t, http.StatusOK)
	}

	// DELETE ends the session and its kernel.
	api.call(t, http.MethodDelete, "api/sessions/"+s.ID, nil).want(t, http.StatusNoContent)
	api.call(t, http.MethodGet, "api/sessions/"+s.ID, nil).want(t, http.StatusNotFound).jupyterError(t)
	api.call(t, http.MethodGet, "api/kernels/"+kernelID, nil).want(t, http.StatusNotFound)
	if n := len(api.sessionsAt(t, "renamed.ipynb")) + len(api.sessionsAt(t, "sessions.ipynb")); n != 0 {
		t.Errorf("GET /api/sessions after DELETE lists %d sessions of the notebook", n)
	}
	waitGone(t, d, &nbv1.Session{}, s.ID)
	waitGone(t, d, &nbv1.Kernel{}, kernelID)
}

func testTwoClients(t *testing.T, api *jupyterAPI) {
	id := api.startKernel(t)
	a := dialJupyterWS(t, api, "api/kernels/"+id+"/channels", "client-a-"+randomID())
	b := dialJupyterWS(t, api, "api/kernels/"+id+"/channels", "client-b-"+randomID())
	// A reply proves that a client's connection is attached to the kernel.
	for _, ws := range []*jupyterWS{a, b} {
		ws.await(jpclient.NewExecution(ws.askKernelInfo()), cellTimeout, "kernel_info", (*jpclient.Execution).Replied)
	}
	var model map[string]any
	r := api.call(t, http.MethodGet, "api/kernels/"+id, nil).want(t, http.StatusOK)
	r.decode(t, &model)
	if model["connections"] != float64(2) {
		t.Errorf("connections %v, want 2: %s", model["connections"], r.body)
	}

	fromA := a.run("print('from A')")
	if fromA.Status() != "ok" || fromA.Stdout.String() != "from A\n" {
		t.Errorf("A's cell: %s", fromA)
	}
	onB := jpclient.NewExecution(fromA.MsgID)
	b.await(onB, cellTimeout, "A's output on B", (*jpclient.Execution).WentIdle)
	if onB.Stdout.String() != "from A\n" {
		t.Errorf("B saw A's output as %q", onB.Stdout.String())
	}
	// The kernel answers shell requests in order, so A's reply, had it gone to B too, would
	// be there before the reply to B's next request.
	b.await(jpclient.NewExecution(b.askKernelInfo()), cellTimeout, "B's kernel_info", (*jpclient.Execution).Replied)
	if m := b.ReplyTo(fromA.MsgID); m != nil {
		t.Errorf("A's %s reached B", m.Header.MsgType)
	}
}

func testReplay(t *testing.T, api *jupyterAPI) {
	id := api.startKernel(t)
	sessionID := "replay-" + randomID()
	ws := dialJupyterWS(t, api, "api/kernels/"+id+"/channels", sessionID)
	ws.await(jpclient.NewExecution(ws.askKernelInfo()), cellTimeout, "kernel_info", (*jpclient.Execution).Replied)
	sent := time.Now()
	msgID := ws.execute("import time\nfor i in range(5):\n    print(i, flush=True)\n    time.sleep(0.5)")
	ws.close()
	// What the server sent before it saw the close reached this connection; the rest must
	// be replayed.
	before := jpclient.NewExecution(msgID)
	ws.drain(before, time.Second)

	// The cell ran to its end with no client: the kernel went busy (activity after the
	// request) and then idle.
	testenv.Eventually(t, "the cell finished while the client was away", cellTimeout, func() error {
		var k struct {
			State        string    `json:"execution_state"`
			LastActivity time.Time `json:"last_activity"`
		}
		api.call(t, http.MethodGet, "api/kernels/"+id, nil).want(t, http.StatusOK).decode(t, &k)
		if k.State != "idle" || !k.LastActivity.After(sent) {
			return fmt.Errorf("execution_state %s, last_activity %s (request sent %s)", k.State, k.LastActivity, sent)
		}
		return nil
	})

	back := dialJupyterWS(t, api, "api/kernels/"+id+"/channels", sessionID)
	e := jpclient.NewExecution(msgID)
	back.await(e, cellTimeout, "the replayed cell", (*jpclient.Execution).Finished)
	if e.Status() != "ok" || before.Stdout.String()+e.Stdout.String() != "0\n1\n2\n3\n4\n" {
		t.Errorf("before leaving stdout %q; replayed: %s; want the rest of 0..4 and an ok reply", before.Stdout.String(), e)
	}
}

// testAPIServerRestart runs a second API server, `nbkube manager --listen`, over the local
// instance's cluster, kills it in the middle of a cell and starts it again: the kernel and
// the client's missed output are still there, since the API server keeps no state.
func testAPIServerRestart(t *testing.T, inst *instance) {
	// The manager runs the controllers too, leader-elected. `nbkube local` takes no lease;
	// a lease held by someone else keeps the manager a follower, so that the local
	// instance's controllers stay the only ones.
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nbkube-manager.nbkube.io"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("e2e-stand-in-leader"), LeaseDurationSeconds: ptr.To(int32(3600)),
			AcquireTime: &now, RenewTime: &now}}
	if err := inst.client.Create(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	api := newJupyterAPI("http://"+testenv.FreeAddr(t)+"/", "e2e-manager-"+randomID(), 2*time.Minute)
	args := []string{"manager", "--listen", strings.TrimSuffix(strings.TrimPrefix(api.base, "http://"), "/"),
		"--token", api.token, "--cookie-secret-file", filepath.Join(t.TempDir(), "cookie_secret"),
		// The local instance's key, from which its controllers derived the kernels' tokens.
		"--agent-token-key-file", filepath.Join(inst.dataDir, "agent_token_key"),
		"--root", inst.root, "--namespace", "default",
		"--leader-elect", "--leader-election-namespace", "default",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
	start := func(n int) (*exec.Cmd, <-chan struct{}) {
		cmd := exec.Command(nbkubeBin, args...)
		// ctrl.GetConfigOrDie reads $KUBECONFIG (manager has no --kubeconfig flag).
		cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(inst.dataDir, "kubeconfig"))
		exited := startServer(t, fmt.Sprintf("manager-%d", n), cmd, nil)
		testenv.Eventually(t, "the manager's API answers", 60*time.Second, func() error {
			select {
			case <-exited:
				return fmt.Errorf("the manager exited: %v", cmd.ProcessState)
			default:
			}
			return api.answers(t)
		})
		return cmd, exited
	}
	mgr, exited := start(1)

	id := api.startKernel(t)
	sessionID := "restart-" + randomID()
	ws := dialJupyterWS(t, api, "api/kernels/"+id+"/channels", sessionID)
	pid := kernelPID(t, ws)
	// One line a second: the kill falls between two lines, so none is in flight in the
	// dying process.
	e := jpclient.NewExecution(ws.execute("import time\nfor i in range(6):\n    print(i, flush=True)\n    time.sleep(1)"))
	ws.await(e, cellTimeout, "the cell's first line", func(e *jpclient.Execution) bool { return e.Stdout.Len() > 0 })
	if err := mgr.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	ws.drain(e, 30*time.Second)
	if e.Finished() {
		t.Fatalf("the cell finished before the API server was killed: %s", e)
	}

	start(2)
	back := dialJupyterWS(t, api, "api/kernels/"+id+"/channels", sessionID)
	back.await(e, cellTimeout, "the rest of the cell after the API server's restart", (*jpclient.Execution).Finished)
	if e.Status() != "ok" || e.Stdout.String() != "0\n1\n2\n3\n4\n5\n" {
		t.Errorf("across the restart: %s, want 0..5 once each and an ok reply", e)
	}
	if ids := api.kernelIDs(t); !slices.Contains(ids, id) {
		t.Errorf("the restarted API server lists %v, not %s", ids, id)
	}
	if !testenv.Alive(pid) {
		t.Errorf("kernel process %d died with the API server", pid)
	}
	// Now, while this API server runs: the cleanups stop it before startKernel's.
	api.call(t, http.MethodDelete, "api/kernels/"+id, nil).want(t, http.StatusNoContent)
}

func testFailingKernel(t *testing.T, inst *instance, api *jupyterAPI) {
	ctx := t.Context()
	ks := &nbv1.KernelSpec{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "broken"}, Spec: nbv1.KernelSpecSpec{
		DisplayName: "Broken", Language: "python",
		Argv: []string{"/bin/sh", "-c", "echo broken >&2; exit 3", "{connection_file}"}}}
	if err := inst.client.Create(ctx, ks); err != nil {
		t.Fatal(err)
	}
	// An admin's `kubectl apply` then `kubectl wait`: the controllers know the spec.
	testenv.Eventually(t, "kernel spec broken ready", 30*time.Second, func() error {
		if err := inst.client.Get(ctx, client.ObjectKeyFromObject(ks), ks); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(ks.Status.Conditions, nbv1.ConditionReady) {
			return fmt.Errorf("conditions %v", ks.Status.Conditions)
		}
		return nil
	})

	started := time.Now()
	resp := api.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "broken"})
	elapsed := time.Since(started)
	t.Logf("POST /api/kernels of a kernel that exits: %d after %s: %s", resp.status, elapsed.Round(time.Millisecond), resp.body)
	resp.want(t, http.StatusInternalServerError)
	e := resp.jupyterError(t)
	if e.Reason == nil || *e.Reason == "" || !strings.Contains(e.Message, "failed") {
		t.Errorf("error %+v: want the Kernel's Failed reason and a message that says it failed", e)
	}
	if elapsed > 20*time.Second {
		t.Errorf("the failure took %s to be reported", elapsed)
	}
	// A kernel that could not start is not left behind.
	testenv.Eventually(t, "the failed kernel deleted", goneTimeout, func() error {
		var list nbv1.KernelList
		if err := inst.client.List(ctx, &list, client.InNamespace("default")); err != nil {
			return err
		}
		for _, k := range list.Items {
			if k.Spec.KernelSpec == "broken" {
				return fmt.Errorf("kernel %s of spec broken remains", k.Name)
			}
		}
		return nil
	})
}
