package jpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/testenv"
)

// The client is tested against Debian's Jupyter Server (python3-jupyter-server, which
// hack/install-test-deps.sh installs) with a real ipykernel: the server whose protocol it
// speaks, independent of nbkube.

const testTimeout = time.Minute

// jupyterServer runs Jupyter Server for the test and returns its base URL and token, and a
// function that stops it before the test ends.
func jupyterServer(t *testing.T) (base, token string, stop func()) {
	t.Helper()
	const python = "/usr/bin/python3"
	if exec.Command(python, "-c", "import jupyter_server, ipykernel").Run() != nil {
		testenv.Missing(t, "%s has no jupyter_server and ipykernel (hack/install-test-deps.sh)", python)
	}
	dir := t.TempDir()
	addr := testenv.FreeAddr(t)
	host, port, _ := strings.Cut(addr, ":")
	token = NewID()
	cmd := exec.Command(python, "-m", "jupyter_server", "--no-browser", "--allow-root", "--ip="+host, "--port="+port,
		"--port-retries=0", "--ServerApp.token="+token, "--ServerApp.root_dir="+dir)
	// Inherited JUPYTER_ variables would configure the server.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JUPYTER_") && !strings.HasPrefix(kv, "IPYTHONDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "JUPYTER_CONFIG_DIR="+filepath.Join(dir, ".config"), "JUPYTER_DATA_DIR="+filepath.Join(dir, ".data"),
		"JUPYTER_RUNTIME_DIR="+filepath.Join(dir, ".runtime"), "IPYTHONDIR="+filepath.Join(dir, ".ipython"))
	// Its kernels are its children: the process group goes together.
	srv := testenv.StartServer(t, "Jupyter Server", cmd, filepath.Join(t.TempDir(), "jupyter-server.log"), 15*time.Second)
	base = "http://" + addr + "/"
	testenv.Eventually(t, "Jupyter Server answers", testTimeout, func() error {
		select {
		case <-srv.Exited():
			t.Fatalf("Jupyter Server exited: %v", srv.ExitErr())
		default:
		}
		_, err := call(base, token, http.MethodGet, "api/status", http.StatusOK)
		return err
	})
	return base, token, srv.Stop
}

// call makes a request of the API (POST with a python3 kernel's model) and returns the body
// of the answer, an error unless its status is want.
func call(base, token, method, route string, want int) ([]byte, error) {
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"name": "python3"}`)
	}
	req, err := http.NewRequest(method, base+route, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "token "+token)
	resp, err := (&http.Client{Timeout: testTimeout}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return nil, fmt.Errorf("%s %s: %s %s", method, route, resp.Status, out)
	}
	return out, nil
}

// startKernel starts a python3 kernel and returns its id.
func startKernel(t *testing.T, base, token string) string {
	t.Helper()
	body, err := call(base, token, http.MethodPost, "api/kernels", http.StatusCreated)
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &k); err != nil || k.ID == "" {
		t.Fatalf("POST /api/kernels: %s (%v)", body, err)
	}
	return k.ID
}

func TestConn_ExecuteGathersTheRequestsOutputsAndReply(t *testing.T) {
	base, token, _ := jupyterServer(t)
	id := startKernel(t, base, token)
	for _, readAhead := range []int{0, 64} {
		t.Run(fmt.Sprintf("ReadAhead=%d", readAhead), func(t *testing.T) {
			c, err := DialKernel(base, id, Options{Token: token, SessionID: NewID(), Username: "test", ReadAhead: readAhead, Keep: true})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.KernelInfo(time.Now().Add(testTimeout), 0); err != nil {
				t.Fatal(err)
			}
			e, err := c.Execute("import sys; print('out'); print('err', file=sys.stderr); 6*7", testTimeout, nil)
			if err != nil {
				t.Fatal(err)
			}
			if e.Status() != "ok" || e.ReplyType != "execute_reply" || e.Result != "42" || e.Stdout.String() != "out\n" || e.Stderr.String() != "err\n" {
				t.Errorf("execution: %s", e)
			}
			if n := len(e.IOPub); n < 4 || e.IOPub[0] != "status:busy" || e.IOPub[n-1] != "status:idle" {
				t.Errorf("iopub %v, want status:busy first and status:idle last", e.IOPub)
			}
			if m := c.ReplyTo(e.MsgID); m == nil || m.Channel != "shell" || m.Header.MsgType != "execute_reply" {
				t.Errorf("ReplyTo(%s) = %+v", e.MsgID, m)
			}
			e, err = c.Execute("raise ValueError('no')", testTimeout, nil)
			if err != nil || e.Status() != "error" || e.ErrorName() != "ValueError" {
				t.Errorf("a cell that raises: %s (%v)", e, err)
			}
			if c.Frames() == 0 {
				t.Error("no frame counted")
			}
		})
	}
}

func TestConn_ATimeoutEndsOnlyAConnectionThatDoesNotReadAhead(t *testing.T) {
	base, token, _ := jupyterServer(t)
	id := startKernel(t, base, token)
	for _, readAhead := range []int{0, 64} {
		c, err := DialKernel(base, id, Options{Token: token, ReadAhead: readAhead})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Jupyter Server nudges a new connection's kernel: what it answers comes first.
		if err := c.KernelInfo(time.Now().Add(testTimeout), 0); err != nil {
			t.Fatal(err)
		}
		// Then nothing: the wait times out.
		err = c.Until(time.Now().Add(2*time.Second), func(*Msg) (bool, error) { return false, nil })
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("ReadAhead %d: waiting on a quiet connection: %v, want ErrTimeout", readAhead, err)
		}
		e, err := c.Execute("1+1", testTimeout, nil)
		switch {
		case readAhead > 0 && (err != nil || e.Result != "2"):
			t.Errorf("after a timeout, reading ahead: %s (%v)", e, err)
		case readAhead == 0 && !errors.Is(err, ErrEnded):
			t.Errorf("after a timeout, reading directly: %v, want ErrEnded", err)
		}
	}
}

func TestConn_AConnectionTheServerEndsEndsTheWait(t *testing.T) {
	base, token, stop := jupyterServer(t)
	id := startKernel(t, base, token)
	c, err := DialKernel(base, id, Options{Token: token, ReadAhead: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.KernelInfo(time.Now().Add(testTimeout), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := c.Drain(nil, time.Now().Add(testTimeout)); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	select {
	case <-c.Ended():
	default:
		t.Error("Ended is not closed after the connection ended")
	}
	if c.Err() == nil {
		t.Error("Err is nil after the server ended the connection")
	}
	if _, err := c.Next(time.Now().Add(time.Second)); !errors.Is(err, ErrEnded) {
		t.Errorf("Next after the end: %v, want ErrEnded", err)
	}
}
