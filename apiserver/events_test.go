package apiserver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
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
