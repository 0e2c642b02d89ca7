package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/homes"
	"github.com/nbkube/nbkube/internal/identity"
)

// subscribe opens WS /api/events/subscribe with headers and returns the events it reads, as
// decoded JSON objects, on a channel.
func subscribe(t *testing.T, s *testServer, headers []string) <-chan map[string]any {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	ws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.url, "http")+"/api/events/subscribe", h)
	if err != nil {
		t.Fatalf("subscribe: %v (%v)", err, resp)
	}
	t.Cleanup(func() { _ = ws.Close() })
	out := make(chan map[string]any, 100)
	go func() {
		defer close(out)
		for {
			var m map[string]any
			if err := ws.ReadJSON(&m); err != nil {
				return
			}
			out <- m
		}
	}()
	return out
}

// eventsOf collects what arrives on c for a while.
func eventsOf(c <-chan map[string]any, wait time.Duration) []map[string]any {
	var got []map[string]any
	deadline := time.After(wait)
	for {
		select {
		case m, ok := <-c:
			if !ok {
				return got
			}
			got = append(got, m)
		case <-deadline:
			return got
		}
	}
}

func TestEvents_AUserHearsTheirOwnContentsEventsAndAnAdminEveryones(t *testing.T) {
	s, as := homesServer(t, "users/{username}")
	ann, ben, root := subscribe(t, s, as("ann")), subscribe(t, s, as("ben")), subscribe(t, s, as("root"))
	// The subscriptions are registered once the upgrade is answered; the server's first
	// event may come right after.
	expect(t, s.do("PUT", "/api/contents/notes.txt", `{"type":"file","format":"text","content":"x"}`, as("ann")...), http.StatusCreated)
	expect(t, s.do("PUT", "/api/contents/notes.txt", `{"type":"file","format":"text","content":"y"}`, as("ann")...), http.StatusOK)
	expect(t, s.do("PATCH", "/api/contents/notes.txt", `{"path":"renamed.txt"}`, as("ann")...), http.StatusOK)
	expect(t, s.do("GET", "/api/contents/renamed.txt", nil, as("ann")...), http.StatusOK)
	expect(t, s.do("DELETE", "/api/contents/renamed.txt", nil, as("ann")...), http.StatusNoContent)

	want := []string{"upload notes.txt", "save notes.txt", "rename renamed.txt notes.txt", "get renamed.txt", "delete renamed.txt"}
	describe := func(evs []map[string]any) []string {
		var out []string
		for _, e := range evs {
			if e["schema_id"] != "https://events.jupyter.org/jupyter_server/contents_service/v1" || e["version"] != float64(1) || e["timestamp"] == nil {
				t.Errorf("event %v", e)
			}
			d := e["action"].(string) + " " + e["path"].(string)
			if sp, ok := e["source_path"].(string); ok {
				d += " " + sp
			}
			out = append(out, d)
		}
		return out
	}
	if got := describe(eventsOf(ann, 2*time.Second)); strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("ann heard %v, want %v", got, want)
	}
	if got := describe(eventsOf(root, 500*time.Millisecond)); len(got) != len(want) {
		t.Errorf("the admin heard %v, want ann's %d events", got, len(want))
	}
	if got := eventsOf(ben, 500*time.Millisecond); len(got) != 0 {
		t.Errorf("ben heard ann's events: %v", got)
	}
}

func TestEvents_APostedEventOfARegisteredSchemaIsPassedOn(t *testing.T) {
	s, as := homesServer(t, "users/{username}")
	ann, ben := subscribe(t, s, as("ann")), subscribe(t, s, as("ben"))
	ok := `{"schema_id":"https://events.jupyter.org/jupyter_server/contents_service/v1","version":1,"data":{"action":"get","path":"a.ipynb"}}`
	expect(t, s.do("POST", "/api/events", ok, as("ann")...), http.StatusNoContent)
	for _, bad := range []string{
		`{"schema_id":"https://example.com/mine/v1","version":1,"data":{}}`,
		`{"schema_id":"https://events.jupyter.org/jupyter_server/contents_service/v1","version":1,"data":{"action":"explode","path":"a"}}`,
		`{"schema_id":"https://events.jupyter.org/jupyter_server/contents_service/v1","version":1}`,
		`{"schema_id":"https://events.jupyter.org/jupyter_server/contents_service/v1","version":"one","data":{}}`,
		`not json`,
	} {
		r := s.do("POST", "/api/events", bad, as("ann")...)
		expect(t, r, http.StatusBadRequest)
		var body struct{ Message string }
		if err := json.Unmarshal(r.body, &body); err != nil || body.Message == "" {
			t.Errorf("%s: answer %s is no Jupyter error", bad, r.body)
		}
	}
	got := eventsOf(ann, time.Second)
	if len(got) != 1 || got[0]["action"] != "get" || got[0]["path"] != "a.ipynb" {
		t.Errorf("ann heard %v, want her posted event only", got)
	}
	if got := eventsOf(ben, 300*time.Millisecond); len(got) != 0 {
		t.Errorf("ben heard %v", got)
	}
	expect(t, s.do("POST", "/api/events", ok), http.StatusForbidden)
}

// TestEvents_ASubscriberHearsWhatAnotherReplicaCauses runs two replicas over one volume,
// each told of the other: a subscriber of one hears what a request to the other caused,
// once, and only what its user may see.
// seenKernels tells, once died is closed, what every replica's Kernel informer would: a kernel
// of ann's died (internal/repository's envtests test the informer's side).
type seenKernels struct{ died <-chan struct{} }

func (k seenKernels) Watch(ctx context.Context, emit func(owner string, data map[string]any)) error {
	select {
	case <-k.died:
		emit("ann", map[string]any{"action": "died", "kernel_id": "k1", "reason": "OOMKilled", "msg": "the kernel ran out of memory"})
	case <-ctx.Done():
	}
	<-ctx.Done()
	return nil
}

func TestEvents_ASubscriberHearsWhatAnotherReplicaCauses(t *testing.T) {
	root := t.TempDir()
	tpl, err := homes.Parse("users/{username}")
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{"ann": userToken(t, "ann"), "ben": userToken(t, "ben"), "root": userToken(t, "root")}
	as := func(user string) []string { return []string{"Authorization", "token " + tokens[user]} }
	path := filepath.Join(t.TempDir(), "users.yaml")
	writeUsersFile(t, path, tokens, "root")
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	// Both replicas' caches see a kernel of ann's die, as their informers would.
	died := make(chan struct{})
	replica := func(l, peer net.Listener) *testServer {
		users, err := identity.NewUsersFile(path, identity.UsersFileOptions{CheckEvery: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return servedOn(t, l, root, func(o *apiserver.Options) {
			o.Providers = []identity.Provider{users}
			o.Homes = tpl
			o.Peers = func(context.Context) ([]string, error) { return []string{peer.Addr().String()}, nil }
			o.KernelEvents = seenKernels{died: died}
		})
	}
	la, lb := listen(), listen()
	a, b := replica(la, lb), replica(lb, la)

	annA, benA, annB := subscribe(t, a, as("ann")), subscribe(t, a, as("ben")), subscribe(t, b, as("ann"))
	expect(t, b.do("PUT", "/api/contents/notes.txt", `{"type":"file","format":"text","content":"x"}`, as("ann")...), http.StatusCreated)
	expect(t, a.do("DELETE", "/api/contents/notes.txt", nil, as("ann")...), http.StatusNoContent)
	want := "upload notes.txt, delete notes.txt"
	for name, c := range map[string]<-chan map[string]any{"ann on the first replica": annA, "ann on the second": annB} {
		var got []string
		for _, e := range eventsOf(c, 2*time.Second) {
			got = append(got, fmt.Sprint(e["action"], " ", e["path"]))
		}
		if strings.Join(got, ", ") != want {
			t.Errorf("%s heard %v, want %s once each", name, got, want)
		}
	}
	if got := eventsOf(benA, 300*time.Millisecond); len(got) != 0 {
		t.Errorf("ben heard ann's events through the other replica: %v", got)
	}

	// What every replica sees of itself is told by each to its own subscribers, not relayed.
	close(died)
	for name, c := range map[string]<-chan map[string]any{"ann on the first replica": annA, "ann on the second": annB} {
		var got []string
		for _, e := range eventsOf(c, time.Second) {
			got = append(got, fmt.Sprint(e["action"], " ", e["kernel_id"]))
		}
		if strings.Join(got, ", ") != "died k1" {
			t.Errorf("%s heard %v, want the death of k1 once", name, got)
		}
	}
	if got := eventsOf(benA, 300*time.Millisecond); len(got) != 0 {
		t.Errorf("ben heard of ann's kernel: %v", got)
	}

	// Only a replica, with the installation's key, may link; no user may.
	for _, headers := range [][]string{
		as("root"),
		{"X-Nbkube-Peer-Time", strconv.FormatInt(time.Now().Unix(), 10), "X-Nbkube-Peer-Signature", strings.Repeat("0", 64)},
		nil,
	} {
		h := http.Header{}
		for i := 0; i+1 < len(headers); i += 2 {
			h.Set(headers[i], headers[i+1])
		}
		ws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(a.url, "http")+"/api/events/peers", h)
		if err == nil {
			ws.Close()
			t.Errorf("a link with %v was taken", headers)
			continue
		}
		if resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("a link with %v: %v (%v), want 403", headers, err, resp)
		}
	}
}
