package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/jpclient"
)

// Event schemas the tests listen for.
const (
	kernelActionsSchema = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"
	kernelStatusSchema  = "https://events.nbkube.io/kernel_status/v1"
)

// testEvents subscribes to the event bus on one API server and acts through another (the
// chart's release runs two, nbkube local one): a kernel's actions are told as Jupyter Server
// 2's kernel_actions events, a failed one with its status code; the outputs of a run whose
// client left, written into the notebook, and a kernel process killed, as nbkube's
// kernel_status events, which every replica tells of itself from what the cluster says. Each
// is heard once.
func testEvents(t *testing.T, d deployment, _ *jupyterAPI) {
	replicas := d.apiServers(t)
	hear, act := replicas[0], replicas[len(replicas)-1]
	if len(replicas) > 1 {
		t.Logf("subscribed on %s, acting through %s", hear.base, act.base)
	}
	heard := subscribeEvents(t, hear)

	kernel := act.startKernel(t)
	act.call(t, http.MethodPost, "api/kernels/"+kernel+"/interrupt", nil).want(t, http.StatusNoContent)
	act.call(t, http.MethodPost, "api/kernels/"+kernel+"/restart", nil).want(t, http.StatusOK)
	act.call(t, http.MethodDelete, "api/kernels/"+kernel, nil).want(t, http.StatusNoContent)
	act.call(t, http.MethodPost, "api/kernels/"+kernel+"/interrupt", nil).want(t, http.StatusNotFound)
	want := "start success 200, interrupt success 200, restart success 200, shutdown success 200, interrupt error 404"
	got := heard.until(t, 30*time.Second, want, func(m map[string]any) (string, bool) {
		if m["schema_id"] != kernelActionsSchema || m["kernel_id"] != kernel {
			return "", false // the other cases' events
		}
		return fmt.Sprintf("%v %v %v", m["action"], m["status"], m["status_code"]), true
	})
	if got != want {
		t.Errorf("heard %s, want %s", got, want)
	}

	nbPath := outputsOutliveTheClient(t, act)
	sessions := act.sessionsAt(t, nbPath)
	if len(sessions) != 1 || sessions[0].Kernel == nil {
		t.Fatalf("sessions of %s: %+v", nbPath, sessions)
	}
	kernel = sessions[0].Kernel.ID
	ws := dialJupyterWS(t, act, "api/kernels/"+kernel+"/channels", "events-"+randomID())
	ws.await(jpclient.NewExecution(ws.askKernelInfo()), cellTimeout, "kernel_info", (*jpclient.Execution).Replied)
	ws.execute("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
	// The agent tells the status poll (10 s apart at most), which tells the Kernel: a minute.
	var written []string
	died := 0
	got = heard.until(t, 90*time.Second, "died", func(m map[string]any) (string, bool) {
		if m["schema_id"] != kernelStatusSchema || m["kernel_id"] != kernel {
			return "", false
		}
		switch m["action"] {
		case "outputs_written":
			written = append(written, fmt.Sprint(m["path"], " ", m["cells"]))
			return "", false
		case "died":
			died++
			return fmt.Sprintf("%v", m["action"]), m["reason"] == "KernelDied"
		}
		return fmt.Sprintf("%v %v", m["action"], m["reason"]), true
	})
	if got != "died" {
		t.Errorf("heard %s of the killed kernel, want died (KernelDied)", got)
	}
	// A second replica's relay would come at once: wait a little for it. The write may come
	// with the death, in the same poll of the agent's status, told after it.
	heard.until(t, 3*time.Second, "", func(m map[string]any) (string, bool) {
		if m["schema_id"] != kernelStatusSchema || m["kernel_id"] != kernel {
			return "", false
		}
		switch m["action"] {
		case "died":
			died++
		case "outputs_written":
			written = append(written, fmt.Sprint(m["path"], " ", m["cells"]))
		}
		return "", false
	})
	if died != 1 {
		t.Errorf("heard the kernel's death %d times, want once", died)
	}
	if len(written) == 0 || slices.ContainsFunc(written, func(w string) bool { return w != nbPath+" 1" }) {
		t.Errorf("heard the outputs written %v, want %q (once or more)", written, nbPath+" 1")
	}
}

// eventStream is a subscription's events, as they come.
type eventStream struct {
	c <-chan map[string]any
}

// subscribeEvents subscribes to the event bus of api with its token.
func subscribeEvents(t *testing.T, api *jupyterAPI) eventStream {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(api.wsURL("api/events/subscribe"), http.Header{"Authorization": {"token " + api.token}})
	if err != nil {
		t.Fatalf("subscribe: %v (%v)", err, resp)
	}
	t.Cleanup(func() { ws.Close() })
	c := make(chan map[string]any, 1000)
	go func() {
		defer close(c)
		for {
			var m map[string]any
			if ws.ReadJSON(&m) != nil {
				return
			}
			c <- m
		}
	}()
	return eventStream{c: c}
}

// until reads events until what each tells (those it tells) joined with ", " is want, or
// timeout passes; it returns what it heard.
func (s eventStream) until(t *testing.T, timeout time.Duration, want string, tell func(map[string]any) (string, bool)) string {
	t.Helper()
	var got []string
	deadline := time.After(timeout)
	for want == "" || strings.Join(got, ", ") != want {
		select {
		case m, ok := <-s.c:
			if !ok {
				t.Fatalf("the subscription ended after %v", got)
			}
			if what, ok := tell(m); ok {
				got = append(got, what)
				if !strings.HasPrefix(want, strings.Join(got, ", ")) {
					return strings.Join(got, ", ")
				}
			}
		case <-deadline:
			return strings.Join(got, ", ")
		}
	}
	return strings.Join(got, ", ")
}
