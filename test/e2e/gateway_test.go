package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/jpclient"
	"github.com/nbkube/nbkube/internal/testenv"
)

// gatewayRequestTimeout is the Jupyter Server's GatewayClient.request_timeout: a kernel start
// through it waits for nbkube to run a pod and the kernel to answer, which on a loaded machine
// takes longer than Jupyter's default of 42 s.
const gatewayRequestTimeout = 120 * time.Second

// TestGatewayMode runs Debian's Jupyter Server 1.23 in gateway mode (--gateway-url) in front
// of `nbkube local`, as a user with a Jupyter Server of their own would: through that Jupyter
// Server, nbkube's kernel specs are listed, a kernel starts on nbkube, runs code over the
// Jupyter Server's channels WebSocket, is interrupted and restarted, and is shut down.
func TestGatewayMode(t *testing.T) {
	inst := startLocal(t, t.TempDir(), t.TempDir())
	nbkube := inst.api(t)
	jupyter := startJupyterGateway(t, nbkube)
	ctx := context.Background()

	// The kernel specs are nbkube's, passed through unchanged, their logos included.
	var direct, proxied struct {
		Default     string                    `json:"default"`
		KernelSpecs map[string]map[string]any `json:"kernelspecs"`
	}
	nbkube.getJSON(t, "api/kernelspecs", &direct)
	jupyter.getJSON(t, "api/kernelspecs", &proxied)
	if len(direct.KernelSpecs) == 0 || !reflect.DeepEqual(proxied.KernelSpecs, direct.KernelSpecs) {
		t.Errorf("kernel specs through Jupyter Server:\n%v\nnbkube's:\n%v", proxied.KernelSpecs, direct.KernelSpecs)
	}
	if _, ok := proxied.KernelSpecs[proxied.Default]; !ok {
		t.Errorf("the default kernel spec %q through Jupyter Server is not listed", proxied.Default)
	}
	python3, ok := proxied.KernelSpecs["python3"]
	if !ok {
		t.Fatalf("no python3 kernel spec through Jupyter Server: %v", proxied.KernelSpecs)
	}
	resources, _ := python3["resources"].(map[string]any)
	for name, link := range resources {
		path, _ := link.(string)
		want := nbkube.call(t, http.MethodGet, strings.TrimPrefix(path, "/"), nil).want(t, http.StatusOK).body
		if got := jupyter.call(t, http.MethodGet, strings.TrimPrefix(path, "/"), nil).want(t, http.StatusOK).body; len(want) == 0 || !bytes.Equal(got, want) {
			t.Errorf("kernel spec resource %s (%s) through Jupyter Server: %d bytes, nbkube serves %d", name, path, len(got), len(want))
		}
	}

	// A kernel started through Jupyter Server is nbkube's: in its API and a Kernel resource.
	var started struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	jupyter.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}).want(t, http.StatusCreated).decode(t, &started)
	if started.ID == "" || started.Name != "python3" {
		t.Fatalf("kernel started through Jupyter Server: %+v", started)
	}
	if !slices.Contains(nbkube.kernelIDs(t), started.ID) {
		t.Errorf("nbkube does not list kernel %s, started through Jupyter Server", started.ID)
	}
	kernel := &nbv1.Kernel{}
	if err := inst.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: started.ID}, kernel); err != nil {
		t.Fatalf("Kernel resource of the kernel started through Jupyter Server: %v", err)
	}
	if kernel.Spec.KernelSpec != "python3" {
		t.Errorf("Kernel %s runs spec %q, want python3", kernel.Name, kernel.Spec.KernelSpec)
	}

	// Code runs over Jupyter Server's channels WebSocket, which it relays to nbkube's.
	// Jupyter Server 1.23 drops a message that reaches it before its own connection to the
	// gateway is under way (GatewayWebSocketClient.on_message queues it on a future that is
	// never resolved when _connect has not run yet), so the client first asks for kernel_info,
	// again while it is unanswered. (JupyterLab, too, asks for it on every new connection.)
	// The connection is JupyterLab 3's: token in the header, a session id, no subprotocol
	// (Jupyter Server 1.23 knows none), the JSON protocol.
	ch := dialJupyterWS(t, jupyter, "api/kernels/"+started.ID+"/channels", randomID())
	if err := ch.awaitKernelInfo(60 * time.Second); err != nil {
		// Jupyter Server's log shows only that its connection to nbkube closed; say why.
		k := &nbv1.Kernel{}
		_ = inst.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: started.ID}, k)
		t.Fatalf("through Jupyter Server: %v; nbkube answers its channels request with %s; the Kernel's status: %+v",
			err, channelsAnswer(nbkube, started.ID), k.Status)
	}
	run := ch.run("1+1")
	if run.Status() != "ok" || run.Result != "2" {
		t.Errorf("1+1: reply %v, result %q, want ok and \"2\"", run.Reply, run.Result)
	}
	if kinds := run.IOPub; len(kinds) < 2 || kinds[0] != "status:busy" || kinds[len(kinds)-1] != "status:idle" {
		t.Errorf("1+1: iopub %v, want busy first and idle last", kinds)
	}
	if out := ch.run(`print("hello"); x = 41`).Stdout.String(); out != "hello\n" {
		t.Errorf("print: stdout %q, want \"hello\\n\"", out)
	}

	// An interrupt through Jupyter Server reaches the kernel. ipykernel turns SIGINT into
	// KeyboardInterrupt only while it runs code, so the cell prints once it is inside.
	start := time.Now()
	run = jpclient.NewExecution(ch.execute("import time\nprint('sleeping', flush=True)\ntime.sleep(60)"))
	ch.await(run, cellTimeout, "the sleeping cell's first output", func(e *jpclient.Execution) bool {
		return strings.Contains(e.Stdout.String(), "sleeping")
	})
	jupyter.call(t, http.MethodPost, "api/kernels/"+started.ID+"/interrupt", nil).want(t, http.StatusNoContent)
	ch.await(run, cellTimeout, "the interrupted cell", (*jpclient.Execution).Finished)
	if run.Status() != "error" || run.Reply["ename"] != "KeyboardInterrupt" || time.Since(start) > 45*time.Second {
		t.Errorf("interrupted cell: reply %v after %s, want a KeyboardInterrupt well before 60 s", run.Reply, time.Since(start))
	}

	// A restart through Jupyter Server gives the same kernel a fresh process.
	var restarted struct {
		ID string `json:"id"`
	}
	jupyter.call(t, http.MethodPost, "api/kernels/"+started.ID+"/restart", nil).want(t, http.StatusOK).decode(t, &restarted)
	if restarted.ID != started.ID {
		t.Errorf("restart answered kernel %q, want %q", restarted.ID, started.ID)
	}
	if err := ch.awaitKernelInfo(60 * time.Second); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	if run := ch.run("x"); run.Reply["ename"] != "NameError" {
		t.Errorf("after a restart, x: reply %v, want a NameError", run.Reply)
	}

	// Jupyter Server lists the kernel from nbkube's list, parsing nbkube's model as it goes.
	type listedKernel struct {
		ID             string `json:"id"`
		ExecutionState string `json:"execution_state"`
	}
	var listed []listedKernel
	jupyter.getJSON(t, "api/kernels", &listed)
	if !slices.ContainsFunc(listed, func(k listedKernel) bool { return k.ID == started.ID && k.ExecutionState != "" }) {
		t.Errorf("Jupyter Server lists %+v, want kernel %s with an execution state", listed, started.ID)
	}

	// Shut down through Jupyter Server, the kernel is gone from nbkube.
	ch.close()
	jupyter.call(t, http.MethodDelete, "api/kernels/"+started.ID, nil).want(t, http.StatusNoContent)
	nbkube.call(t, http.MethodGet, "api/kernels/"+started.ID, nil).want(t, http.StatusNotFound)
	if slices.Contains(nbkube.kernelIDs(t), started.ID) {
		t.Errorf("nbkube still lists kernel %s after its shutdown through Jupyter Server", started.ID)
	}
	testenv.Eventually(t, "Kernel resource deleted", 30*time.Second, func() error {
		err := inst.client.Get(ctx, client.ObjectKey{Namespace: "default", Name: started.ID}, &nbv1.Kernel{})
		if err == nil {
			return errors.New("it still exists")
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get: %w", err)
		}
		return nil
	})
	if left := jupyter.kernelIDs(t); len(left) != 0 {
		t.Errorf("Jupyter Server still lists kernels %v after the shutdown", left)
	}
}

// TestGatewayMode_ActsForTheUserItNames runs Jupyter Server in gateway mode as a JupyterHub
// single-user server does, for user ann, in front of `nbkube local` with a users file: the
// gateway authenticates as gw, who may act for others, and Jupyter Server names ann in
// KERNEL_USERNAME. The kernel is ann's: she sees it, ben does not, and the gateway goes on
// using it. A Jupyter Server of ben's, naming ann, is refused.
func TestGatewayMode_ActsForTheUserItNames(t *testing.T) {
	tokens := map[string]string{}
	var file strings.Builder
	file.WriteString("users:\n")
	for _, u := range []struct {
		name  string
		actAs bool
	}{{"ann", false}, {"ben", false}, {"gw", true}} {
		tok, err := identity.NewUserToken(u.name)
		if err != nil {
			t.Fatal(err)
		}
		h, err := identity.HashSecret(tok)
		if err != nil {
			t.Fatal(err)
		}
		tokens[u.name] = tok
		fmt.Fprintf(&file, "- name: %s\n  act_as: %v\n  token_hash: %q\n", u.name, u.actAs, h)
	}
	usersFile := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(usersFile, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir, root := t.TempDir(), t.TempDir()
	inst := startLocal(t, dataDir, root, "--auth=users,token", "--users-file="+usersFile)
	base := inst.api(t).base
	as := func(user string) *jupyterAPI { return newJupyterAPI(base, tokens[user], 2*time.Minute) }
	jupyter := startJupyterGateway(t, as("gw"), "KERNEL_USERNAME=ann")

	var started struct {
		ID string `json:"id"`
	}
	jupyter.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}).want(t, http.StatusCreated).decode(t, &started)
	kernel := &nbv1.Kernel{}
	if err := inst.client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: started.ID}, kernel); err != nil {
		t.Fatalf("Kernel resource of the kernel started through Jupyter Server: %v", err)
	}
	if kernel.Spec.Owner != "ann" || kernel.Spec.Env["KERNEL_USERNAME"] != "ann" {
		t.Errorf("the kernel started for ann: owner %q, env %v", kernel.Spec.Owner, kernel.Spec.Env)
	}
	if ids := as("ann").kernelIDs(t); !slices.Equal(ids, []string{started.ID}) {
		t.Errorf("ann lists kernels %v, want %s", ids, started.ID)
	}
	if ids := as("ben").kernelIDs(t); len(ids) != 0 {
		t.Errorf("ben lists kernels %v", ids)
	}
	as("ben").call(t, http.MethodGet, "api/kernels/"+started.ID, nil).want(t, http.StatusNotFound)

	// The gateway, which names ann only when it starts a kernel, goes on using it.
	ch := dialJupyterWS(t, jupyter, "api/kernels/"+started.ID+"/channels", randomID())
	if err := ch.awaitKernelInfo(60 * time.Second); err != nil {
		t.Fatalf("through Jupyter Server: %v; nbkube answers its channels request with %s", err, channelsAnswer(as("gw"), started.ID))
	}
	if run := ch.run("import os; print(os.environ['KERNEL_USERNAME'])"); run.Stdout.String() != "ann\n" {
		t.Errorf("KERNEL_USERNAME in the kernel: %q, reply %v", run.Stdout.String(), run.Reply)
	}
	ch.close()
	jupyter.call(t, http.MethodDelete, "api/kernels/"+started.ID, nil).want(t, http.StatusNoContent)

	// Ben's own Jupyter Server, naming ann, is refused: Jupyter Server passes nbkube's 403 on.
	bens := startJupyterGateway(t, as("ben"), "KERNEL_USERNAME=ann")
	bens.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}).want(t, http.StatusForbidden)
	if ids := as("ann").kernelIDs(t); len(ids) != 0 {
		t.Errorf("ann lists kernels %v after ben's refused start", ids)
	}
}

// startJupyterGateway runs Debian's Jupyter Server with nbkube as its gateway, in throw-away
// directories so that neither the machine's Jupyter setup nor an earlier run leaks in, and
// returns its API once it answers; env (NAME=value) is added to its environment. It is
// stopped (SIGTERM, as a user stops it) at cleanup, and its log is shown if the test failed.
func startJupyterGateway(t *testing.T, nbkube *jupyterAPI, env ...string) *jupyterAPI {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"root", "config", "data", "runtime", "ipython"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	host, port, err := net.SplitHostPort(testenv.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	// The client waits as long as Jupyter Server may wait for nbkube, plus a margin, so that a
	// slow nbkube shows up as Jupyter's error rather than as this client's.
	jupyter := newJupyterAPI("http://"+net.JoinHostPort(host, port)+"/", randomID(), gatewayRequestTimeout+10*time.Second)
	cmd := exec.Command("/usr/bin/python3", "-m", "jupyter_server", "--no-browser", "--allow-root",
		"--ip="+host, "--port="+port, "--port-retries=0",
		"--ServerApp.token="+jupyter.token, "--ServerApp.root_dir="+filepath.Join(dir, "root"),
		"--gateway-url="+strings.TrimSuffix(nbkube.base, "/"),
		fmt.Sprintf("--GatewayClient.request_timeout=%d", int(gatewayRequestTimeout.Seconds())))
	// Inherited JUPYTER_* and KERNEL_* variables would configure the server or be forwarded
	// to nbkube in every kernel start; the gateway token goes in the environment rather than
	// in the process list.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JUPYTER_") && !strings.HasPrefix(kv, "KERNEL_") && !strings.HasPrefix(kv, "IPYTHONDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env,
		"JUPYTER_GATEWAY_AUTH_TOKEN="+nbkube.token,
		"JUPYTER_CONFIG_DIR="+filepath.Join(dir, "config"), "JUPYTER_DATA_DIR="+filepath.Join(dir, "data"),
		"JUPYTER_RUNTIME_DIR="+filepath.Join(dir, "runtime"), "IPYTHONDIR="+filepath.Join(dir, "ipython"))
	cmd.Env = append(cmd.Env, env...)
	exited := startServer(t, "jupyter-server", cmd, syscall.SIGTERM)
	testenv.Eventually(t, "Jupyter Server answers "+jupyter.base, 60*time.Second, func() error {
		select {
		case <-exited:
			t.Fatalf("Jupyter Server exited before it answered")
		default:
		}
		return jupyter.answers(t)
	})
	return jupyter
}

// channelsAnswer is how nbkube answers the request Jupyter Server's gateway client makes for
// a kernel's channels: a WebSocket upgrade with the gateway token and no subprotocol.
func channelsAnswer(nbkube *jupyterAPI, kernelID string) string {
	dialer := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	conn, resp, err := dialer.Dial(nbkube.wsURL("api/kernels/"+url.PathEscape(kernelID)+"/channels"), http.Header{"Authorization": {"token " + nbkube.token}})
	if err == nil {
		conn.Close()
		return "101 Switching Protocols"
	}
	if resp == nil {
		return err.Error()
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return fmt.Sprintf("%s: %s", resp.Status, body)
}
