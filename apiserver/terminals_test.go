package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/gorilla/websocket"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nbkube/nbkube/agent"
	nbv1 "github.com/nbkube/nbkube/api/v1alpha1"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/agenttoken"
	"github.com/nbkube/nbkube/internal/homes"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/quota"
	"github.com/nbkube/nbkube/internal/repository"
	"github.com/nbkube/nbkube/internal/testenv"
)

// terminalTokenKey is the installation's agent token key in these tests.
var terminalTokenKey = []byte("terminal-tests-agent-token-key-0123456789")

// terminalServer is an API server with terminals over the real resources of ns, whose users
// are the tokens' "token-<name>": ann and ben, each with a home under the contents root, and
// admin. No controller runs here: its Terminals stay Pending until a test sets their status.
func terminalServer(t *testing.T, c client.Client, ns string, opts ...serverOption) *testServer {
	t.Helper()
	tmpl, err := homes.Parse("{username}")
	if err != nil {
		t.Fatal(err)
	}
	var providers []identity.Provider
	for _, u := range []identity.User{{Name: "ann"}, {Name: "ben"}, {Name: "admin", Admin: true}} {
		providers = append(providers, identity.NewToken("token-"+u.Name, u))
	}
	return newServer(t, append([]serverOption{func(o *apiserver.Options) {
		ledger := &quota.Ledger{Client: c, Reader: c, APIReader: c, Namespace: ns}
		specs := &repository.KernelSpecs{Reader: c, Namespace: ns}
		kernels := &repository.Kernels{Reader: c, Writer: c, Namespace: ns, Specs: specs, Agents: agentclient.New(),
			AgentTokenKey: terminalTokenKey, StartTimeout: 20 * time.Second, Quota: ledger, Homes: tmpl}
		o.Kernels = kernels
		o.KernelSpecs = specs
		o.Quotas = &repository.Quotas{Ledger: ledger, Specs: specs}
		o.Terminals = &repository.Terminals{Kernels: kernels}
		o.Homes = tmpl
		o.Providers = providers
		o.Log = testr.New(t)
	}}, opts...)...)
}

// terminalNamed is the Terminal of that name, as the cluster has it.
func terminalNamed(t *testing.T, c client.Client, ns, name string) *nbv1.Terminal {
	t.Helper()
	term := &nbv1.Terminal{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, term); err != nil {
		t.Fatalf("terminal %s: %v", name, err)
	}
	return term
}

// terminalNames are the names of a list of terminals, sorted.
func terminalNames(t *testing.T, r response) []string {
	t.Helper()
	expect(t, r, http.StatusOK)
	var list []map[string]any
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	var names []string
	for _, m := range list {
		names = append(names, m["name"].(string))
	}
	slices.Sort(names)
	return names
}

// startedTerminal is the name of the terminal a POST by user made.
func startedTerminal(t *testing.T, s *testServer, user string, body any) string {
	t.Helper()
	r := s.do("POST", "/api/terminals", body, as(user)...)
	expect(t, r, http.StatusOK)
	name, _ := r.json(t)["name"].(string)
	if name == "" {
		t.Fatalf("no name in %s", r.body)
	}
	return name
}

// wsURL is the terminal's WebSocket address on s.
func (s *testServer) wsURL(name string) string {
	return "ws" + strings.TrimPrefix(s.url, "http") + "/terminals/websocket/" + name
}

// The model is Jupyter's, {name, last_activity}; a user sees and touches only their own
// terminals, by name, in lists, on the WebSocket, as if others' did not exist; an admin sees
// everyone's.
func TestTerminals_EachSeesOnlyTheirOwnAndAdminsAll(t *testing.T) {
	c, ns := quotaNamespace(t)
	s := terminalServer(t, c, ns)
	schemas := newSpecSchemas(t, func() map[string]any { _, doc := loadSpec(t); return doc }())

	r := s.do("POST", "/api/terminals", nil, as("ann")...)
	expect(t, r, http.StatusOK)
	schemas.check("POST", "/api/terminals", r)
	model := r.json(t)
	annTerm, _ := model["name"].(string)
	if len(model) != 2 || !regexp.MustCompile(`^t[a-z0-9]{10}$`).MatchString(annTerm) {
		t.Fatalf("model %s: want {name, last_activity} with a generated name", r.body)
	}
	if at, err := time.Parse(time.RFC3339Nano, model["last_activity"].(string)); err != nil || time.Since(at) > time.Minute {
		t.Errorf("last_activity %v: %v", model["last_activity"], err)
	}
	term := terminalNamed(t, c, ns, annTerm)
	if term.Spec.Owner != "ann" || term.Spec.KernelSpec != "python3" || term.Spec.Home != "ann" || term.Spec.Cwd != "" {
		t.Errorf("ann's terminal: %+v", term.Spec)
	}
	benTerm := startedTerminal(t, s, "ben", map[string]any{})

	if got := terminalNames(t, s.do("GET", "/api/terminals", nil, as("ann")...)); !slices.Equal(got, []string{annTerm}) {
		t.Errorf("ann lists %v", got)
	}
	if got := terminalNames(t, s.do("GET", "/api/terminals", nil, as("ben")...)); !slices.Equal(got, []string{benTerm}) {
		t.Errorf("ben lists %v", got)
	}
	all := []string{annTerm, benTerm}
	slices.Sort(all)
	if got := terminalNames(t, s.do("GET", "/api/terminals", nil, as("admin")...)); !slices.Equal(got, all) {
		t.Errorf("admin lists %v, want %v", got, all)
	}
	schemas.check("GET", "/api/terminals", s.do("GET", "/api/terminals", nil, as("admin")...))
	r = s.do("GET", "/api/terminals/"+annTerm, nil, as("ann")...)
	expect(t, r, http.StatusOK)
	schemas.check("GET", "/api/terminals/{terminal_id}", r)
	expect(t, s.do("GET", "/api/terminals/"+annTerm, nil, as("admin")...), http.StatusOK)

	// Ben: ann's terminal is as missing as one that never was.
	for _, name := range []string{annTerm, "tnosuchterm"} {
		r := s.do("GET", "/api/terminals/"+name, nil, as("ben")...)
		expect(t, r, http.StatusNotFound)
		schemas.check("GET", "/api/terminals/{terminal_id}", r)
		if m := r.json(t)["message"]; m != "Terminal not found: "+name {
			t.Errorf("ben's GET of %s: %v", name, m)
		}
		r = s.do("DELETE", "/api/terminals/"+name, nil, as("ben")...)
		expect(t, r, http.StatusNotFound)
		schemas.check("DELETE", "/api/terminals/{terminal_id}", r)
		_, resp, err := websocket.DefaultDialer.Dial(s.wsURL(name)+"?token=token-ben", nil)
		if err == nil || resp.StatusCode != http.StatusNotFound {
			t.Errorf("ben's WebSocket to %s: %v %v", name, resp, err)
		}
	}
	// Ben cannot take the name of ann's terminal either, nor learn whose it is.
	r = s.do("POST", "/api/terminals", map[string]any{"name": annTerm}, as("ben")...)
	expect(t, r, http.StatusConflict)
	if msg := r.json(t)["message"].(string); strings.Contains(msg, "ann") {
		t.Errorf("the refusal names the owner: %s", msg)
	}
	if term := terminalNamed(t, c, ns, annTerm); term.Spec.Owner != "ann" {
		t.Errorf("ann's terminal is now %s's", term.Spec.Owner)
	}

	// Ann deletes hers: 204, then it is gone for her, and from the cluster.
	r = s.do("DELETE", "/api/terminals/"+annTerm, nil, as("ann")...)
	expect(t, r, http.StatusNoContent)
	schemas.check("DELETE", "/api/terminals/{terminal_id}", r)
	expect(t, s.do("GET", "/api/terminals/"+annTerm, nil, as("ann")...), http.StatusNotFound)
	if got := terminalNames(t, s.do("GET", "/api/terminals", nil, as("admin")...)); !slices.Equal(got, []string{benTerm}) {
		t.Errorf("after ann's DELETE, admin lists %v", got)
	}
	// A plain GET of the socket is no upgrade.
	expect(t, s.do("GET", "/terminals/websocket/"+benTerm, nil, as("ben")...), http.StatusBadRequest)
	_, resp, err := websocket.DefaultDialer.Dial(s.wsURL(benTerm), nil)
	if err == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("the socket without a token: %v %v", resp, err)
	}
}

// A name in the body is a terminal's name: the user's own terminal of that name is the
// answer, a name that Kubernetes cannot take is refused. The cwd is relative to the user's
// home; one that is not there is left out, as Jupyter does; one that leaves the home is
// refused. kernel_name picks the spec whose image the terminal runs in.
func TestTerminals_NamesCwdAndKernelSpec(t *testing.T) {
	c, ns := quotaNamespace(t)
	s := terminalServer(t, c, ns)
	if err := os.MkdirAll(filepath.Join(s.root, "ann", "proj", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.root, "ann", "file.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	if name := startedTerminal(t, s, "ann", map[string]any{"name": "mine1"}); name != "mine1" {
		t.Fatalf("asked for mine1, got %s", name)
	}
	before := terminalNamed(t, c, ns, "mine1")
	if name := startedTerminal(t, s, "ann", map[string]any{"name": "mine1", "cwd": "proj"}); name != "mine1" {
		t.Fatalf("asked for mine1 again, got %s", name)
	}
	if after := terminalNamed(t, c, ns, "mine1"); after.UID != before.UID || after.Spec.Cwd != "" {
		t.Errorf("the second start made another terminal or changed it: %+v", after.Spec)
	}
	for _, bad := range []string{"Mine", "my_term", "a-b", strings.Repeat("a", 64), "../x"} {
		r := s.do("POST", "/api/terminals", map[string]any{"name": bad}, as("ann")...)
		expect(t, r, http.StatusBadRequest)
	}
	expect(t, s.do("POST", "/api/terminals", `{"name": 7}`, as("ann")...), http.StatusBadRequest)

	for _, tc := range []struct{ cwd, want string }{
		{"proj", "proj"}, {"/proj/sub/", "proj/sub"}, {"proj/./sub", "proj/sub"}, {"", ""},
		{"missing", ""}, {"file.txt", ""}, {".hidden", ""},
	} {
		name := startedTerminal(t, s, "ann", map[string]any{"cwd": tc.cwd})
		if got := terminalNamed(t, c, ns, name).Spec.Cwd; got != tc.want {
			t.Errorf("cwd %q: the terminal's is %q, want %q", tc.cwd, got, tc.want)
		}
	}
	for _, bad := range []string{"..", "../ben", "proj/../../ben"} {
		r := s.do("POST", "/api/terminals", map[string]any{"cwd": bad}, as("ann")...)
		expect(t, r, http.StatusBadRequest)
	}

	name := startedTerminal(t, s, "ann", map[string]any{"kernel_name": "R"})
	if got := terminalNamed(t, c, ns, name).Spec.KernelSpec; got != "r" {
		t.Errorf("kernel_name R: the terminal's spec is %q", got)
	}
	r := s.do("POST", "/api/terminals", map[string]any{"kernel_name": "nope"}, as("ann")...)
	expect(t, r, http.StatusBadRequest)
	if msg := r.json(t)["message"].(string); !strings.Contains(msg, "nope") {
		t.Errorf("an unknown kernel spec: %s", msg)
	}

	// The admin's terminals mount the whole volume, as the admin's kernels do.
	name = startedTerminal(t, s, "admin", map[string]any{"cwd": "ann/proj"})
	if term := terminalNamed(t, c, ns, name); term.Spec.Home != nbv1.HomeWholeVolume || term.Spec.Cwd != "ann/proj" {
		t.Errorf("admin's terminal: %+v", term.Spec)
	}
}

// A terminals limit refuses the start past it, Jupyter-style (403, the limit in the reason),
// and makes nothing; a DELETE gives the room back. Kernel specs the policy does not allow
// are refused for terminals as for kernels, and the server's terminal kernel spec applies only
// to the users who may use it.
func TestTerminals_TheUsersLimitsHold(t *testing.T) {
	c, ns := quotaNamespace(t)
	if err := c.Create(t.Context(), &nbv1.UserPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ben"},
		Spec: nbv1.UserPolicySpec{Users: []string{"ben"}, KernelSpecs: []string{"python3", "r"}, Limits: nbv1.UserLimits{Terminals: new(int32(1))}}}); err != nil {
		t.Fatal(err)
	}
	s := terminalServer(t, c, ns, func(o *apiserver.Options) { o.TerminalKernelSpec = "big" })
	first := startedTerminal(t, s, "ben", nil)
	if got := terminalNamed(t, c, ns, first).Spec.KernelSpec; got != "python3" {
		t.Errorf("ben may not use big: his terminal runs %s, want his default python3", got)
	}
	q := s.do("GET", "/api/status", nil, as("ben")...).json(t)["quota"].(map[string]any)
	if q["usage"].(map[string]any)["terminals"] != 1.0 || q["limits"].(map[string]any)["terminals"] != 1.0 {
		t.Errorf("ben's quota with one terminal: %v", q)
	}
	r := s.do("POST", "/api/terminals", nil, as("ben")...)
	expect(t, r, http.StatusForbidden)
	if m := r.json(t); m["reason"] != "terminals: 1 of 1" || !strings.Contains(m["message"].(string), "Quota exceeded") {
		t.Errorf("the second terminal: %s", r.body)
	}
	var list nbv1.TerminalList
	if err := c.List(t.Context(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Errorf("terminals after the refusal: %d, %v", len(list.Items), err)
	}
	expect(t, s.do("DELETE", "/api/terminals/"+first, nil, as("ben")...), http.StatusNoContent)
	second := startedTerminal(t, s, "ben", map[string]any{"kernel_name": "r"})
	expect(t, s.do("DELETE", "/api/terminals/"+second, nil, as("ben")...), http.StatusNoContent)
	r = s.do("POST", "/api/terminals", map[string]any{"kernel_name": "big"}, as("ben")...)
	expect(t, r, http.StatusForbidden)
	if msg := r.json(t)["message"].(string); !strings.Contains(msg, `"big"`) {
		t.Errorf("a spec ben may not use: %s", msg)
	}
	// Ann has no policy: the server's terminal kernel spec is hers.
	if got := terminalNamed(t, c, ns, startedTerminal(t, s, "ann", nil)).Spec.KernelSpec; got != "big" {
		t.Errorf("ann's terminal runs %s, want the server's big", got)
	}
}

// Without terminals the routes answer 404, as Jupyter Server's without its terminals
// extension, and the pages and /api/me say there are none.
func TestTerminals_OffAnswers404AndSaysSo(t *testing.T) {
	for _, on := range []bool{false, true} {
		s := newServer(t, withAssets(builtAssets), func(o *apiserver.Options) {
			if on {
				o.Terminals = &repository.Terminals{}
			}
		})
		if !on {
			for _, tc := range []struct{ method, path string }{
				{"GET", "/api/terminals"}, {"POST", "/api/terminals"}, {"GET", "/api/terminals/t1"},
				{"DELETE", "/api/terminals/t1"}, {"GET", "/terminals/websocket/t1"},
			} {
				r := s.do(tc.method, tc.path, nil)
				expect(t, r, http.StatusNotFound)
				if m := r.json(t)["message"]; m != "Not Found" {
					t.Errorf("%s %s: %v", tc.method, tc.path, m)
				}
			}
		}
		if cfg := pageConfig(t, s.do("GET", "/", nil, "Accept", acceptHTML)); cfg["terminalsAvailable"] != on {
			t.Errorf("terminals on %v: the page's configuration %v", on, cfg)
		}
		r := s.do("GET", "/api/me?permissions="+url.QueryEscape(`{"terminals":["read","write","execute"]}`), nil)
		expect(t, r, http.StatusOK)
		got := r.json(t)["permissions"].(map[string]any)["terminals"].([]any)
		if (len(got) == 3) != on {
			t.Errorf("terminals on %v: permissions %v", on, got)
		}
	}
}

// agentOn runs a real terminal agent, a shell on a pty, for the terminal term at host, with
// the token the API server derives for it; done receives its end.
func agentOn(t *testing.T, term *nbv1.Terminal, host, dir string) (done <-chan error, stop func()) {
	t.Helper()
	secret := t.TempDir()
	token := agenttoken.Terminal(terminalTokenKey, term.Namespace, term.Name, string(term.UID))
	if err := os.WriteFile(filepath.Join(secret, agentapi.SecretKeyToken), []byte(token), 0o400); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() {
		ended <- agent.RunTerminal(ctx, agent.TerminalConfig{
			Listen: net.JoinHostPort(host, strconv.Itoa(agentapi.Port)), SecretDir: secret,
			Shell: []string{"/bin/sh"}, Dir: dir,
			Env:       []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "TERM=xterm-256color", "PS1=$ "},
			StopGrace: 2 * time.Second, Log: logr.Discard(),
		})
	}()
	// Listening once its probe answers.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + net.JoinHostPort(host, strconv.Itoa(agentapi.Port)) + agentapi.PathHealthz)
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case err := <-ended:
			t.Fatalf("the agent ended: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent does not answer: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ended, cancel
}

// loopbackHost is an address of its own on the loopback network, for the agent's fixed port.
func loopbackHost(t *testing.T) string {
	t.Helper()
	host := fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(250), 1+rand.IntN(250))
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(agentapi.Port)))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", host, err)
	}
	l.Close()
	return host
}

// setTerminalStatus records what the controller would of the terminal.
func setTerminalStatus(t *testing.T, c client.Client, ns, name string, st nbv1.TerminalStatus) {
	t.Helper()
	term := terminalNamed(t, c, ns, name)
	term.Status = st
	if err := c.Status().Update(t.Context(), term); err != nil {
		t.Fatal(err)
	}
}

// terminalClient is one client of a terminal's WebSocket, reading its messages.
type terminalClient struct {
	t      *testing.T
	ws     *websocket.Conn
	stdout strings.Builder
}

func dialTerminal(t *testing.T, url string) (*terminalClient, error) {
	ws, resp, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		return nil, fmt.Errorf("dial: %w (%v)", err, resp)
	}
	return &terminalClient{t: t, ws: ws}, nil
}

// next is the next message, as terminado frames it.
func (tc *terminalClient) next() ([]any, error) {
	_ = tc.ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	typ, data, err := tc.ws.ReadMessage()
	if err != nil {
		return nil, err
	}
	if typ != websocket.TextMessage {
		return nil, fmt.Errorf("a frame of type %d", typ)
	}
	var msg []any
	if err := json.Unmarshal(data, &msg); err != nil {
		return nil, fmt.Errorf("message %s: %w", data, err)
	}
	if len(msg) == 0 {
		return nil, fmt.Errorf("an empty message %s", data)
	}
	if msg[0] == "stdout" {
		tc.stdout.WriteString(msg[1].(string))
	}
	return msg, nil
}

// waitFor reads until the output so far matches re.
func (tc *terminalClient) waitFor(re string) {
	tc.t.Helper()
	pattern := regexp.MustCompile(re)
	for !pattern.MatchString(tc.stdout.String()) {
		if _, err := tc.next(); err != nil {
			tc.t.Fatalf("waiting for %q in %q: %v", re, tc.stdout.String(), err)
		}
	}
}

func (tc *terminalClient) send(msg ...any) {
	tc.t.Helper()
	if err := tc.ws.WriteJSON(msg); err != nil {
		tc.t.Fatal(err)
	}
}

// dialWaiting dials url in the background and checks, for 300 ms, that the connection waits
// (its terminal has no agent to reach yet). The function it returns gives the connection once
// it is through, failing the test with what when that takes longer than wait.
func dialWaiting(t *testing.T, url string) func(wait time.Duration, what string) *terminalClient {
	t.Helper()
	dialed := make(chan *terminalClient, 1)
	failed := make(chan error, 1)
	go func() {
		tc, err := dialTerminal(t, url)
		if err != nil {
			failed <- err
			return
		}
		dialed <- tc
	}()
	select {
	case <-dialed:
		t.Fatal("connected to a terminal whose agent cannot answer yet")
	case err := <-failed:
		t.Fatalf("a connection to a pending terminal: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	return func(wait time.Duration, what string) *terminalClient {
		t.Helper()
		select {
		case tc := <-dialed:
			return tc
		case err := <-failed:
			t.Fatal(err)
		case <-time.After(wait):
			t.Fatal(what)
		}
		return nil
	}
}

// TestTerminalSocket_ProxiesARealShell: a client connects while the terminal's pod is still
// coming and is through once it runs; it types and sees the shell's output, resizes the pty
// and sees stty say so; a second client gets the replay; a DELETE hangs the shell up through
// the agent, ends the connections and the terminal. Nothing the connections started is left.
func TestTerminalSocket_ProxiesARealShell(t *testing.T) {
	c, ns := quotaNamespace(t)
	s := terminalServer(t, c, ns)
	host := loopbackHost(t)
	name := startedTerminal(t, s, "ann", nil)
	before := goleak.IgnoreCurrent()

	// Pending: the connection waits for the pod.
	waiting := dialWaiting(t, s.wsURL(name)+"?token=token-ann")
	done, stop := agentOn(t, terminalNamed(t, c, ns, name), host, t.TempDir())
	defer stop()
	setTerminalStatus(t, c, ns, name, nbv1.TerminalStatus{Phase: nbv1.TerminalRunning, PodIP: host})
	first := waiting(15*time.Second, "the waiting connection did not get through once the terminal ran")
	if msg, err := first.next(); err != nil || msg[0] != "setup" {
		t.Fatalf("first message %v, %v; want setup", msg, err)
	}
	first.send("stdin", "echo hi\r")
	// Wait for the prompt before typing again: typed ahead, the line is echoed by the pty
	// before the shell prints its prompt, and the answer then follows "$ ". That holds for
	// this first line too, typed as soon as the connection is set up, maybe before the
	// shell's first prompt.
	first.waitFor(`(\r\n|\$ )hi\r\n\$ `)
	first.send("set_size", 30, 100, 600, 800)
	first.send("stdin", "stty size\r")
	first.waitFor(`(\r\n|\$ )30 100\r\n`)

	// The last activity comes from the agent, fresher than the status's (none here).
	r := s.do("GET", "/api/terminals/"+name, nil, as("ann")...)
	expect(t, r, http.StatusOK)
	if at, err := time.Parse(time.RFC3339Nano, r.json(t)["last_activity"].(string)); err != nil || time.Since(at) > 10*time.Second {
		t.Errorf("last_activity of a terminal just used: %s (%v)", r.body, err)
	}

	second, err := dialTerminal(t, s.wsURL(name)+"?token=token-ann")
	if err != nil {
		t.Fatal(err)
	}
	// The replay has the first line's answer, after a prompt or not (see above).
	second.waitFor(`(\r\n|\$ )hi\r\n`)

	expect(t, s.do("DELETE", "/api/terminals/"+name, nil, as("ann")...), http.StatusNoContent)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the agent ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent was not asked to shut down")
	}
	for _, tc := range []*terminalClient{first, second} {
		// What the shell printed last, ["disconnect", 1], then the close.
		for {
			if _, err := tc.next(); err != nil {
				if !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
					t.Errorf("the connection ended with %v", err)
				}
				break
			}
		}
		_ = tc.ws.Close()
	}
	expect(t, s.do("GET", "/api/terminals/"+name, nil, as("ann")...), http.StatusNotFound)
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &nbv1.Terminal{}); err == nil {
		t.Error("the Terminal is still there")
	}
	goleak.VerifyNone(t, before,
		// Idle keep-alive connections of the HTTP clients, not of the proxy.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// A terminal that has ended takes the connection and ends it at once as terminado does for a
// shell that exited, with ["disconnect", 1]; one whose pod failed says why first.
func TestTerminalSocket_AnEndedTerminalDisconnects(t *testing.T) {
	c, ns := quotaNamespace(t)
	s := terminalServer(t, c, ns)
	for _, tc := range []struct {
		phase nbv1.TerminalPhase
		cond  *metav1.Condition
		says  string
	}{
		{phase: nbv1.TerminalEnded},
		{phase: nbv1.TerminalFailed, cond: &metav1.Condition{Type: nbv1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: "OOMKilled", Message: "the pod ran out of memory"}, says: "OOMKilled: the pod ran out of memory"},
	} {
		name := startedTerminal(t, s, "ann", nil)
		st := nbv1.TerminalStatus{Phase: tc.phase}
		if tc.cond != nil {
			tc.cond.LastTransitionTime = metav1.Now()
			meta.SetStatusCondition(&st.Conditions, *tc.cond)
		}
		setTerminalStatus(t, c, ns, name, st)
		if tc.phase == nbv1.TerminalEnded {
			// Jupyter forgets a terminal whose shell exited: not listed, 404; the socket still
			// tells a client that comes back what happened.
			testenv.Eventually(t, "the ended terminal unlisted", 10*time.Second, func() error {
				if names := terminalNames(t, s.do("GET", "/api/terminals", nil, as("ann")...)); slices.Contains(names, name) {
					return fmt.Errorf("listed: %v", names)
				}
				return nil
			})
			expect(t, s.do("GET", "/api/terminals/"+name, nil, as("ann")...), http.StatusNotFound)
		}
		cl, err := dialTerminal(t, s.wsURL(name)+"?token=token-ann")
		if err != nil {
			t.Fatalf("%s: %v", tc.phase, err)
		}
		var kinds []string
		for {
			msg, err := cl.next()
			if err != nil {
				if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
					t.Errorf("%s: the connection ended with %v", tc.phase, err)
				}
				break
			}
			kinds = append(kinds, msg[0].(string))
		}
		_ = cl.ws.Close()
		want := []string{"disconnect"}
		if tc.says != "" {
			want = []string{"stdout", "disconnect"}
		}
		if !slices.Equal(kinds, want) || !strings.Contains(cl.stdout.String(), tc.says) {
			t.Errorf("%s: messages %v, output %q", tc.phase, kinds, cl.stdout.String())
		}
	}
}

// TestTerminalSocket_ConnectsOnceThePendingPodsAgentAnswers: a pod has its address before the
// kubelet's probe finds its agent ready and the controller records it Running; the WebSocket
// asks the agent itself, as a kernel start does, and is through as soon as it answers, while
// the status still says Pending.
func TestTerminalSocket_ConnectsOnceThePendingPodsAgentAnswers(t *testing.T) {
	c, ns := quotaNamespace(t)
	s := terminalServer(t, c, ns)
	host := loopbackHost(t)
	name := startedTerminal(t, s, "ann", nil)
	setTerminalStatus(t, c, ns, name, nbv1.TerminalStatus{Phase: nbv1.TerminalPending, PodIP: host})

	waiting := dialWaiting(t, s.wsURL(name)+"?token=token-ann")
	_, stop := agentOn(t, terminalNamed(t, c, ns, name), host, t.TempDir())
	defer stop()
	tc := waiting(5*time.Second, "the connection did not get through once the pending pod's agent answered")
	defer tc.ws.Close()
	if phase := terminalNamed(t, c, ns, name).Status.Phase; phase != nbv1.TerminalPending {
		t.Fatalf("the terminal is %s; the test means it Pending", phase)
	}
	if msg, err := tc.next(); err != nil || msg[0] != "setup" {
		t.Fatalf("first message %v, %v; want setup", msg, err)
	}
	tc.send("stdin", "echo pending-$((6*7))\r")
	tc.waitFor(`pending-42`)
}

// cacheBehind reads as a replica's cache that has not seen the Terminals made elsewhere yet.
type cacheBehind struct{ client.Reader }

func (c cacheBehind) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*nbv1.Terminal); ok {
		return apierrors.NewNotFound(nbv1.GroupVersion.WithResource("terminals").GroupResource(), key.Name)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestTerminals_AReplicaWhoseCacheIsBehindReadsTheTerminalLive: POST answers as soon as the
// Terminal exists, and the client's next request may reach another replica whose cache has
// not seen it: by name, it is read around the cache rather than answered 404; a name nobody
// has is still 404, and another user's terminal is still not theirs.
func TestTerminals_AReplicaWhoseCacheIsBehindReadsTheTerminalLive(t *testing.T) {
	c, ns := quotaNamespace(t)
	first := terminalServer(t, c, ns)
	name := startedTerminal(t, first, "ann", nil)
	behind := terminalServer(t, c, ns, func(o *apiserver.Options) {
		k := *o.Terminals.(*repository.Terminals).Kernels
		k.Reader = cacheBehind{c}
		o.Terminals = &repository.Terminals{Kernels: &k, APIReader: c}
	})
	r := behind.do("GET", "/api/terminals/"+name, nil, as("ann")...)
	expect(t, r, http.StatusOK)
	if r.json(t)["name"] != name {
		t.Errorf("the model %s", r.body)
	}
	expect(t, behind.do("GET", "/api/terminals/"+name, nil, as("ben")...), http.StatusNotFound)
	expect(t, behind.do("GET", "/api/terminals/tnobodyhas1", nil, as("ann")...), http.StatusNotFound)
	expect(t, behind.do("DELETE", "/api/terminals/"+name, nil, as("ann")...), http.StatusNoContent)
}
