package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/builder"
	"github.com/nbkube/nbkube/internal/testenv"
)

// terminadoConn is a client of a terminal agent's WebSocket, which speaks terminado's JSON
// messages.
type terminadoConn struct {
	t  *testing.T
	ws *websocket.Conn
	// out is what the terminal printed so far.
	out strings.Builder
}

func (c *terminadoConn) send(msg ...any) {
	c.t.Helper()
	if err := c.ws.WriteJSON(msg); err != nil {
		c.t.Fatal(err)
	}
}

// next is the next message, within a deadline.
func (c *terminadoConn) next() []any {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	var msg []any
	if err := c.ws.ReadJSON(&msg); err != nil {
		c.t.Fatalf("read (printed so far %q): %v", c.out.String(), err)
	}
	if len(msg) == 0 {
		c.t.Fatal("an empty message")
	}
	return msg
}

// until reads until the terminal has printed want.
func (c *terminadoConn) until(want string) { c.untilCount(want, 1) }

// untilCount reads until the terminal has printed want n times.
func (c *terminadoConn) untilCount(want string, n int) {
	c.t.Helper()
	for strings.Count(c.out.String(), want) < n {
		if msg := c.next(); msg[0] == "stdout" {
			s, _ := msg[1].(string)
			c.out.WriteString(s)
		}
	}
}

// TestTerminals_ATerminalRunsItsOwnersShellInHerHomeUnderTheLocalNode makes a Terminal of
// ann's under `nbkube local` with users (which sandboxes their pods): it becomes Running, and
// its agent answers terminado's WebSocket with the terminal's token only, with a shell in
// ann's home that sees hers and not ben's files. Deleting the Terminal ends the pod.
func TestTerminals_ATerminalRunsItsOwnersShellInHerHomeUnderTheLocalNode(t *testing.T) {
	// The controller asks a running terminal's agent every second.
	inst, _, _, root := startSandboxedUsers(t, "--kernel-status-interval=1")
	for user, file := range map[string]string{"ann": "ann.txt", "ben": "ben.txt"} {
		if err := os.MkdirAll(filepath.Join(root, user), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, user, file), []byte(user), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	term := &nbv1.Terminal{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ann-1"},
		Spec: nbv1.TerminalParameters{Owner: "ann", KernelSpec: "python3"}}
	began := time.Now()
	if err := inst.client.Create(ctx, term); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the terminal Running", time.Minute, func() error {
		if err := inst.client.Get(ctx, client.ObjectKeyFromObject(term), term); err != nil {
			return err
		}
		if term.Status.Phase != nbv1.TerminalRunning || term.Status.PodIP == "" {
			return fmt.Errorf("phase %s, address %q, conditions %+v", term.Status.Phase, term.Status.PodIP, term.Status.Conditions)
		}
		return nil
	})
	t.Logf("Running %s after the Terminal was made", time.Since(began).Round(time.Millisecond))
	if c := meta.FindStatusCondition(term.Status.Conditions, nbv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}

	secret := &corev1.Secret{}
	if err := inst.client.Get(ctx, client.ObjectKeyFromObject(term), secret); err != nil {
		t.Fatal(err)
	}
	url := "ws://" + net.JoinHostPort(term.Status.PodIP, strconv.Itoa(agentapi.Port)) + agentapi.PathTerminal
	for _, token := range []string{"", "not-the-token"} {
		h := http.Header{}
		if token != "" {
			h.Set("Authorization", agentapi.AuthScheme+" "+token)
		}
		if ws, resp, err := websocket.DefaultDialer.DialContext(ctx, url, h); err == nil {
			ws.Close()
			t.Fatalf("the agent took a WebSocket with the token %q", token)
		} else if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("a WebSocket with the token %q: %v, %v; want 403", token, resp, err)
		}
	}
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, url, http.Header{"Authorization": {agentapi.AuthScheme + " " + string(secret.Data[agentapi.SecretKeyToken])}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	c := &terminadoConn{t: t, ws: ws}
	if msg := c.next(); msg[0] != "setup" {
		t.Fatalf("first message %v, want setup", msg)
	}
	c.send("set_size", 24, 200)
	c.send("stdin", "echo hi\r")
	// The line typed, echoed, then what it printed.
	c.untilCount("hi\r\n", 2)
	// The shell's directory is ann's home, at the kernels' mount path in her sandbox, and
	// ben's home is not there to read.
	c.send("stdin", "echo \"<$(pwd)|$(ls | tr '\\n' ' ')>\"\r")
	c.until("<" + builder.ContentsDir + "|ann.txt >")
	c.send("stdin", "cat "+filepath.Join(root, "ben", "ben.txt")+" || echo no-\"ben\"\r")
	c.until("\r\nno-ben")

	// The controller polls the agent: one connection, and activity.
	testenv.Eventually(t, "the agent's report in the status", 20*time.Second, func() error {
		if err := inst.client.Get(ctx, client.ObjectKeyFromObject(term), term); err != nil {
			return err
		}
		if term.Status.Connections != 1 || term.Status.LastActivity == nil || term.Status.LastActivity.Time.Before(began.Truncate(time.Second)) {
			return fmt.Errorf("connections %d, last activity %v", term.Status.Connections, term.Status.LastActivity)
		}
		return nil
	})
	// One /metrics, with the token, carries the controllers' count of running terminals.
	metrics := string(inst.api(t).call(t, http.MethodGet, "metrics", nil).want(t, http.StatusOK).body)
	if !strings.Contains(metrics, "\nterminal_currently_running_total 1\n") {
		t.Errorf("/metrics lacks terminal_currently_running_total 1")
	}

	// Deleting the Terminal ends the pod (the garbage collector follows its references).
	if err := inst.client.Delete(ctx, term, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the terminal's pod and secret collected", time.Minute, func() error {
		for _, o := range []client.Object{&corev1.Pod{}, &corev1.Secret{}} {
			switch err := inst.client.Get(ctx, client.ObjectKeyFromObject(term), o); {
			case err == nil:
				return fmt.Errorf("the %T is still there", o)
			case !apierrors.IsNotFound(err):
				return err
			}
		}
		return nil
	})
	// The shell went with it: the connection to its agent ends.
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var msg []any
		err := ws.ReadJSON(&msg)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the terminal's WebSocket is still open 30 s after its pod was collected")
		}
		if err != nil || msg[0] == "disconnect" {
			break
		}
	}
}
