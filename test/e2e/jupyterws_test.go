package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/jpclient"
)

// jupyterWS is a test's connection to a kernel's channels WebSocket, or to one channel of the
// older IPython interface: a jpclient.Conn that reads ahead, so that a wait can time out, and
// keeps what it read, whose waits fail the test where jpclient returns an error. It serves
// for nbkube's channels and for Jupyter Server's alike.
type jupyterWS struct {
	*jpclient.Conn
	t testing.TB
	// only is the channel of a single-channel connection (/kernels/<id>/shell).
	only string
}

// dialJupyterWS opens the WebSocket at route (relative to the API's base URL) with the API's
// token; sessionID, when set, is sent as ?session_id= and used in the headers, as
// JupyterLab does, so that the agent can replay what the client misses while away.
func dialJupyterWS(t testing.TB, api *jupyterAPI, route, sessionID string) *jupyterWS {
	t.Helper()
	ws := &jupyterWS{t: t}
	if strings.HasPrefix(route, "kernels/") {
		// kernels/<id>/shell, iopub or stdin.
		ws.only = path.Base(route)
	}
	c, err := jpclient.Dial(api.wsURL(route), jpclient.Options{
		Token: api.token, SessionID: sessionID, Username: "e2e", Channel: ws.only,
		ReadAhead: 1024, Keep: true, BadFrame: func(err error) { t.Errorf("%v", err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ws.Conn = c
	t.Cleanup(c.Close)
	return ws
}

// close ends the connection (jpclient.Conn.Close); it may be called again.
func (ws *jupyterWS) close() { ws.Close() }

// sendRaw writes one text frame as is.
func (ws *jupyterWS) sendRaw(text string) {
	ws.t.Helper()
	if err := ws.SendRaw([]byte(text)); err != nil {
		ws.t.Fatalf("send: %v", err)
	}
}

// askKernelInfo sends a kernel_info_request on shell and returns its msg_id.
func (ws *jupyterWS) askKernelInfo() string {
	ws.t.Helper()
	id, err := ws.Send("shell", "kernel_info_request", struct{}{})
	if err != nil {
		ws.t.Fatal(err)
	}
	return id
}

// execute sends an execute_request for code and returns its msg_id. stop_on_error is false:
// after a cell that raises, ipykernel would otherwise abort the requests that reach it in the
// next moments, and the tests send their next cell at once.
func (ws *jupyterWS) execute(code string) string {
	ws.t.Helper()
	id, err := ws.SendExecute(code, false)
	if err != nil {
		ws.t.Fatal(err)
	}
	return id
}

// run executes code and waits (cellTimeout) for its reply and the kernel's return to idle.
func (ws *jupyterWS) run(code string) *jpclient.Execution {
	ws.t.Helper()
	e, err := ws.Execute(code, cellTimeout, nil)
	if err != nil {
		ws.t.Fatal(err)
	}
	return e
}

// await reads messages into e until done(e), failing the test after timeout or when the
// connection ends first.
func (ws *jupyterWS) await(e *jpclient.Execution, timeout time.Duration, what string, done func(*jpclient.Execution) bool) {
	ws.t.Helper()
	if err := ws.Await(e, time.Now().Add(timeout), done); err != nil {
		ws.t.Fatalf("%s: %v", what, err)
	}
}

// drain reads what is left into e (if not nil) until the connection ends.
func (ws *jupyterWS) drain(e *jpclient.Execution, timeout time.Duration) {
	ws.t.Helper()
	if err := ws.Drain(e, time.Now().Add(timeout)); err != nil {
		ws.t.Fatalf("the connection did not end within %s: %v", timeout, err)
	}
}

// awaitKernelInfo asks for kernel_info every 3 seconds until the kernel answers (see
// jpclient.Conn.KernelInfo).
func (ws *jupyterWS) awaitKernelInfo(within time.Duration) error {
	return ws.KernelInfo(time.Now().Add(within), 3*time.Second)
}

// kernelPID is the kernel's process id, as the kernel itself tells.
func kernelPID(t testing.TB, ws *jupyterWS) int {
	t.Helper()
	pid, err := ws.KernelPID(cellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
