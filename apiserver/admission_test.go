package apiserver_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/testenv"
)

// Requests with bodies take turns by bytes: a large save being received holds the budget, a
// request that finds no room in time gets 503 with Retry-After and changes nothing, requests
// without bodies go on, and once the large one is done the others pass.
func TestAdmission_BodiesWaitForRoomByBytes(t *testing.T) {
	s := newServer(t, func(o *apiserver.Options) {
		o.BodyMemory = 3 << 20
		o.AdmissionWait = time.Second
	})
	content := strings.Repeat("x", 900_000)
	body := fmt.Sprintf(`{"type":"file","format":"text","content":%q}`, content)

	// A large body, of which the server has read only the start.
	pr, pw := io.Pipe()
	req, err := http.NewRequest("PUT", s.url+"/api/contents/large.txt", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	req.Header.Set("Authorization", "token "+testToken)
	large := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			large <- 0
			return
		}
		resp.Body.Close()
		large <- resp.StatusCode
	}()
	if _, err := pw.Write([]byte(body[:1000])); err != nil {
		t.Fatal(err)
	}
	// Those bytes may sit in the connection's buffers before the server reads the request:
	// the large save holds the budget once a probe finds no room. The probe's body is no
	// JSON, so it changes nothing either way (400 when admitted).
	testenv.Eventually(t, "the large save admitted", 10*time.Second, func() error {
		if r := s.do("PUT", "/api/contents/probe.txt", `not json`); r.status != http.StatusServiceUnavailable {
			return fmt.Errorf("a probe got %d", r.status)
		}
		return nil
	})

	start := time.Now()
	r := s.do("PUT", "/api/contents/small.txt", `{"type":"file","format":"text","content":"hi"}`)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.json(t)["message"].(string), "too many large requests") {
		t.Errorf("a small save while the budget is full: %d %v %s", r.status, r.header, r.body)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Errorf("refused after %v, before the admission wait", waited)
	}
	if _, err := os.Stat(filepath.Join(s.root, "small.txt")); !os.IsNotExist(err) {
		t.Errorf("the refused save wrote its file: %v", err)
	}
	// Requests without bodies do not wait.
	expect(t, s.do("GET", "/api/contents", nil), http.StatusOK)

	// A request waiting when the large one ends gets in.
	waiting := make(chan response, 1)
	go func() {
		waiting <- s.do("PUT", "/api/contents/waiting.txt", `{"type":"file","format":"text","content":"w"}`)
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := pw.Write([]byte(body[1000:])); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if got := <-large; got != http.StatusCreated {
		t.Errorf("the large save: %d", got)
	}
	if r := <-waiting; r.status != http.StatusCreated {
		t.Errorf("the save that waited: %d %s", r.status, r.body)
	}

	// Small requests share the budget: many at once all pass.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			r := s.do("PUT", fmt.Sprintf("/api/contents/s%d.txt", i), `{"type":"file","format":"text","content":"s"}`)
			if r.status != http.StatusCreated {
				t.Errorf("small save %d: %d %s", i, r.status, r.body)
			}
		})
	}
	wg.Wait()
	if data, err := os.ReadFile(filepath.Join(s.root, "large.txt")); err != nil || len(data) != len(content) {
		t.Errorf("large.txt: %d bytes, %v", len(data), err)
	}
}
