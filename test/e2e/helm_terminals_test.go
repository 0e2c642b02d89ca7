//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/internal/testenv"
)

// testHelmTerminal uses a terminal as a user of the chart would, through the API server's
// Service: POST /api/terminals makes a Terminal and its pod; the WebSocket gives a shell in the
// pod that runs in the directory asked for on the contents volume (a file written through the
// API is there, one the shell writes shows in the API); the kernels' egress policy holds for it
// (the cluster's DNS reached, the kube-apiserver and nbkube's API server not), enforced by the
// cluster's policy enforcer; the API server, which proxies the shell, may not exec into pods;
// DELETE ends the connection, the Terminal and its pod.
func testHelmTerminal(t *testing.T, env *helmEnv, api *jupyterAPI) {
	ctx := t.Context()
	c := env.client
	api.call(t, http.MethodPut, "api/contents/e2e/term", map[string]any{"type": "directory"}).want(t, http.StatusCreated)
	api.call(t, http.MethodPut, "api/contents/e2e/term/probe.py", map[string]any{
		"type": "file", "format": "text", "content": probeScript,
	}).want(t, http.StatusCreated)

	start := time.Now()
	var model struct {
		Name         string `json:"name"`
		LastActivity string `json:"last_activity"`
	}
	api.call(t, http.MethodPost, "api/terminals", map[string]any{"cwd": "e2e/term"}).want(t, http.StatusOK).decode(t, &model)
	if model.Name == "" || model.LastActivity == "" {
		t.Fatalf("the model %+v", model)
	}
	term := &nbv1.Terminal{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: model.Name}, term); err != nil {
		t.Fatalf("the Terminal resource: %v", err)
	}
	if term.Spec.Owner == "" {
		t.Errorf("the Terminal has no owner: %+v", term.Spec)
	}

	h := http.Header{}
	h.Set("Authorization", "token "+api.token)
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, api.wsURL("terminals/websocket/"+model.Name), h)
	if err != nil {
		t.Fatalf("the terminal's WebSocket: %v (%v)", err, resp)
	}
	resp.Body.Close()
	defer ws.Close()
	sh := &terminadoConn{t: t, ws: ws}
	if msg := sh.next(); msg[0] != "setup" {
		t.Fatalf("first message %v, want setup", msg)
	}
	sh.send("stdin", "echo \"in:$(basename \"$PWD\") $(head -c 14 probe.py)\"; echo from-shell > shell.txt; echo ready-$((6*7))\r")
	sh.until("ready-42")
	t.Logf("a shell answered %.1fs after POST /api/terminals", time.Since(start).Seconds())
	if !strings.Contains(sh.out.String(), "in:term import socket") {
		t.Errorf("the shell is not in e2e/term with the API's file: %q", sh.out.String())
	}
	var file struct {
		Content string `json:"content"`
	}
	api.call(t, http.MethodGet, "api/contents/e2e/term/shell.txt", nil).want(t, http.StatusOK).decode(t, &file)
	if file.Content != "from-shell\n" {
		t.Errorf("the shell's file reads %q through the API", file.Content)
	}

	pod := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: model.Name}, pod); err != nil {
		t.Fatalf("the terminal's pod: %v", err)
	}
	if pod.Labels[nbv1.LabelComponent] != "terminal" {
		t.Errorf("the pod's labels %v", pod.Labels)
	}

	// The egress policy of kernels holds for terminals, run from the shell itself.
	kubeAPI, dns := &corev1.Service{}, &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, kubeAPI); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "kube-dns"}, dns); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: helmRelease + "-nbkube"}, svc); err != nil {
		t.Fatal(err)
	}
	probes := []struct {
		what, addr string
		wait       time.Duration
		reached    bool
	}{
		{"the cluster's DNS", net.JoinHostPort(dns.Spec.ClusterIP, "53"), policyApplied, true},
		{"the kube-apiserver", net.JoinHostPort(kubeAPI.Spec.ClusterIP, strconv.Itoa(int(kubeAPI.Spec.Ports[0].Port))), probeRefused, false},
		{"the API server's Service", net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port))), probeRefused, false},
	}
	for i, p := range probes {
		host, port, _ := net.SplitHostPort(p.addr)
		if p.reached {
			sh.send("stdin", fmt.Sprintf("python3 probe.py %s %s %.0f; echo probe-%d-$?\r", host, port, p.wait.Seconds(), i))
			if code := sh.untilMatch(regexp.MustCompile(fmt.Sprintf(`probe-%d-(\d+)`, i)), p.wait+30*time.Second); code != "0" {
				t.Errorf("from the terminal, %s %s: not reached (output %q)", p.what, p.addr, sh.out.String())
			}
			continue
		}
		// The enforcer programs a new pod's policy within a sync of its own: until then the
		// pod's egress is open. Refused within policyApplied, and how long it took is said.
		sh.send("stdin", fmt.Sprintf("n=0; while python3 probe.py %s %s %.0f >/dev/null; do n=$((n+1)); [ $n -ge %d ] && break; sleep 1; done; echo probe-%d-$n\r",
			host, port, p.wait.Seconds(), int(policyApplied.Seconds()), i))
		n, _ := strconv.Atoi(sh.untilMatch(regexp.MustCompile(fmt.Sprintf(`probe-%d-(\d+)`, i)), policyApplied*5))
		if n >= int(policyApplied.Seconds()) {
			t.Errorf("from the terminal, %s %s: still reached after %s (output %q)", p.what, p.addr, policyApplied, sh.out.String())
		} else {
			t.Logf("figure: from the new terminal's pod, %s refused after %d earlier attempts reached it", p.what, n)
		}
	}

	// The API server proxies the shell to the agent; it may not exec into pods (nor may anyone
	// the chart makes, which RBAC of the chart's tests shows elsewhere).
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:" + helmNamespace + ":" + env.apiServerAccount(t),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: helmNamespace, Verb: "create", Resource: "pods", Subresource: "exec",
		},
	}}
	if err := c.Create(ctx, review); err != nil {
		t.Fatal(err)
	}
	if review.Status.Allowed {
		t.Errorf("the API server's service account may exec into pods: %+v", review.Status)
	}

	api.call(t, http.MethodDelete, "api/terminals/"+model.Name, nil).want(t, http.StatusNoContent)
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var msg []any
		if err := ws.ReadJSON(&msg); err != nil {
			break // closed: the end the API server and agent gave it
		}
		if len(msg) > 0 && msg[0] == "disconnect" {
			break
		}
	}
	testenv.Eventually(t, "the terminal's pod and resource gone", time.Minute, func() error {
		for _, obj := range []client.Object{pod, term} {
			switch err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); {
			case err == nil:
				return fmt.Errorf("%T %s is still there", obj, obj.GetName())
			case !apierrors.IsNotFound(err):
				return err
			}
		}
		return nil
	})
	api.call(t, http.MethodGet, "api/terminals/"+model.Name, nil).want(t, http.StatusNotFound)
}

// apiServerAccount is the service account the release's API server pods run as.
func (e *helmEnv) apiServerAccount(t *testing.T) string {
	t.Helper()
	var pods corev1.PodList
	if err := e.client.List(t.Context(), &pods, client.InNamespace(helmNamespace), client.MatchingLabels{nbv1.LabelComponent: "apiserver"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 || pods.Items[0].Spec.ServiceAccountName == "" {
		t.Fatal("no API server pod with a service account")
	}
	return pods.Items[0].Spec.ServiceAccountName
}

// untilMatch reads until what the terminal printed matches re, within wait (a command may
// print nothing for a while), and returns re's first group.
func (c *terminadoConn) untilMatch(re *regexp.Regexp, wait time.Duration) string {
	c.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if m := re.FindStringSubmatch(c.out.String()); m != nil {
			return m[1]
		}
		_ = c.ws.SetReadDeadline(deadline)
		var msg []any
		if err := c.ws.ReadJSON(&msg); err != nil {
			c.t.Fatalf("waiting for %s (printed so far %q): %v", re, c.out.String(), err)
		}
		if len(msg) > 1 && msg[0] == "stdout" {
			s, _ := msg[1].(string)
			c.out.WriteString(s)
		}
	}
}
