package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/testenv"
)

// withStore serves the tree at the server's root with a store of these options.
func withStore(t *testing.T, root string, opts contents.Options) serverOption {
	t.Helper()
	store, err := contents.New(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return func(o *apiserver.Options) { o.Contents = store }
}

type trashEntry struct {
	ID           string  `json:"id"`
	Name         string  `json:"name"`
	OriginalPath string  `json:"original_path"`
	Type         string  `json:"type"`
	Size         *int64  `json:"size"`
	Deleted      *string `json:"deleted"`
}

func (s *testServer) trash() []trashEntry {
	s.t.Helper()
	r := s.do("GET", "/api/trash", nil)
	expect(s.t, r, http.StatusOK)
	var list []trashEntry
	if err := json.Unmarshal(r.body, &list); err != nil || list == nil {
		s.t.Fatalf("trash listing %s: %v", r.body, err)
	}
	return list
}

func (s *testServer) put(path, content string) {
	s.t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(s.root, path)), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.root, path), []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func TestTrash_DeletedDirectoryIsListedRestoredAndGoneForGood(t *testing.T) {
	s := newServer(t)
	s.put("d/x.txt", "x")
	s.put("d/sub/n.ipynb", notebookJSON)
	expect(t, s.do("DELETE", "/api/contents/d", nil), http.StatusNoContent)
	if r := s.do("GET", "/api/contents", nil); strings.Contains(string(r.body), `"d"`) || strings.Contains(string(r.body), "nbkube") {
		t.Errorf("root listing after delete: %s", r.body)
	}
	expect(t, s.do("GET", "/api/contents/d", nil), http.StatusNotFound)
	list := s.trash()
	if len(list) != 1 || list[0].ID != "d" || list[0].Name != "d" || list[0].OriginalPath != "d" || list[0].Type != "directory" || list[0].Size != nil || list[0].Deleted == nil {
		t.Fatalf("trash %+v", list)
	}

	r := s.do("POST", "/api/trash/d/restore", nil)
	expect(t, r, http.StatusOK)
	if m := r.json(t); m["path"] != "d" || m["type"] != "directory" || r.header.Get("Location") != "/api/contents/d" {
		t.Errorf("restore answered %v %s", r.header, r.body)
	}
	if r := s.do("GET", "/api/contents/d/x.txt", nil); r.json(t)["content"] != "x" {
		t.Errorf("restored content %s", r.body)
	}
	if len(s.trash()) != 0 {
		t.Error("a restored entry is still listed")
	}
	expect(t, s.do("POST", "/api/trash/d/restore", nil), http.StatusNotFound)

	// Deleted again while a new d takes its place: restoring there conflicts, elsewhere works.
	expect(t, s.do("DELETE", "/api/contents/d", nil), http.StatusNoContent)
	expect(t, s.do("PUT", "/api/contents/d", map[string]string{"type": "directory"}), http.StatusCreated)
	r = s.do("POST", "/api/trash/d/restore", nil)
	expect(t, r, http.StatusConflict)
	if msg := r.json(t)["message"]; msg != "File already exists: d" {
		t.Errorf("conflict message %q", msg)
	}
	r = s.do("POST", "/api/trash/d/restore", map[string]string{"path": "d/old"})
	expect(t, r, http.StatusOK)
	if r.json(t)["path"] != "d/old" {
		t.Errorf("restore elsewhere %s", r.body)
	}
	expect(t, s.do("GET", "/api/contents/d/old/sub/n.ipynb", nil), http.StatusOK)

	// Gone for good: one entry, then all.
	for _, p := range []string{"d/old/x.txt", "d/old/sub", "d"} {
		expect(t, s.do("DELETE", "/api/contents/"+p, nil), http.StatusNoContent)
	}
	expect(t, s.do("DELETE", "/api/trash/x.txt", nil), http.StatusNoContent)
	expect(t, s.do("DELETE", "/api/trash/x.txt", nil), http.StatusNotFound)
	if got := len(s.trash()); got != 2 {
		t.Errorf("%d entries after deleting one of three", got)
	}
	expect(t, s.do("DELETE", "/api/trash", nil), http.StatusNoContent)
	if got := s.trash(); len(got) != 0 {
		t.Errorf("emptied trash lists %+v", got)
	}
}

func TestTrash_IDsAreURLPathSegments(t *testing.T) {
	s := newServer(t)
	s.put("a b/ü %.txt", "u")
	expect(t, s.do("DELETE", "/api/contents/a%20b/%C3%BC%20%25.txt", nil), http.StatusNoContent)
	if list := s.trash(); len(list) != 1 || list[0].ID != "ü %.txt" || list[0].OriginalPath != "a b/ü %.txt" || list[0].Size == nil || *list[0].Size != 1 {
		t.Fatalf("trash %+v", list)
	}
	for _, id := range []string{"..%2F..%2Ffiles", "%2E%2E", "nope"} {
		r := s.do("POST", "/api/trash/"+id+"/restore", nil)
		expect(t, r, http.StatusNotFound)
	}
	r := s.do("POST", "/api/trash/%C3%BC%20%25.txt/restore", nil)
	expect(t, r, http.StatusOK)
	if loc := r.header.Get("Location"); loc != "/api/contents/a%20b/%C3%BC%20%25.txt" {
		t.Errorf("Location %q", loc)
	}
}

func TestTrash_RestoreRefusesHiddenAndEscapingPaths(t *testing.T) {
	s := newServer(t)
	s.put("f.txt", "f")
	expect(t, s.do("DELETE", "/api/contents/f.txt", nil), http.StatusNoContent)
	for _, to := range []string{".f.txt", ".nbkube/f.txt", "../f.txt", "missing/f.txt"} {
		r := s.do("POST", "/api/trash/f.txt/restore", map[string]string{"path": to})
		if r.status < 400 {
			t.Errorf("restore to %s: %d", to, r.status)
		}
	}
	expect(t, s.do("POST", "/api/trash/f.txt/restore", `{"path":`), http.StatusBadRequest)
	if len(s.trash()) != 1 {
		t.Error("a refused restore changed the trash")
	}
}

func TestTrash_RoutesNeedTheTokenOrTheCookieAndXSRF(t *testing.T) {
	s := newServer(t)
	for _, req := range [][2]string{{"GET", "/api/trash"}, {"DELETE", "/api/trash"}, {"DELETE", "/api/trash/x"}, {"POST", "/api/trash/x/restore"}} {
		expect(t, s.do(req[0], req[1], nil, "Authorization", ""), http.StatusForbidden)
	}
	// A logged-in browser without the XSRF token may look, not change.
	r := s.do("GET", "/api/status?token="+testToken, nil, "Authorization", "")
	var cookie string
	for _, c := range r.header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "nbkube-user-") {
			cookie, _, _ = strings.Cut(c, ";")
		}
	}
	expect(t, s.do("GET", "/api/trash", nil, "Authorization", "", "Cookie", cookie), http.StatusOK)
	expect(t, s.do("DELETE", "/api/trash", nil, "Authorization", "", "Cookie", cookie), http.StatusForbidden)
}

func TestContents_DeletePermanentlyRefusesNonEmptyDirectoriesUnlessAlwaysDeleteDir(t *testing.T) {
	for _, always := range []bool{false, true} {
		root := t.TempDir()
		s := newServerAt(t, root, withStore(t, root, contents.Options{DeletePermanently: true, DeleteNonEmptyDirs: always}))
		s.put("d/x.txt", "x")
		s.put("f.txt", "f")
		expect(t, s.do("DELETE", "/api/contents/f.txt", nil), http.StatusNoContent)
		r := s.do("DELETE", "/api/contents/d", nil)
		if always {
			expect(t, r, http.StatusNoContent)
		} else {
			expect(t, r, http.StatusBadRequest)
			if msg := r.json(t)["message"]; msg != "Directory d not empty" {
				t.Errorf("message %q", msg)
			}
		}
		if len(s.trash()) != 0 {
			t.Error("deleting for good filled the trash")
		}
	}
}

// serving runs the server of o as the binary does, with Serve (which sweeps), over the tree
// at root, until the test's cleanups; register closing o.Contents before, so that it runs
// after the server stops.
func serving(t *testing.T, root string, o apiserver.Options) *testServer {
	t.Helper()
	srv, err := apiserver.New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	return &testServer{t: t, url: "http://" + l.Addr().String(), root: root, hc: &http.Client{}}
}

// TestTrash_ServingSweepsExpiredEntries runs the server as the binary does, with the store's
// clock moved past the entries' age.
func TestTrash_ServingSweepsExpiredEntries(t *testing.T) {
	root := t.TempDir()
	clk := clocktesting.NewFakePassiveClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	store, err := contents.New(root, contents.Options{Clock: clk, TrashMaxAge: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() }) // after the server stops: cleanups run last first
	s := serving(t, root, apiserver.Options{Token: testToken, User: apiserver.User{Name: "alice"}, CookieSecret: []byte(strings.Repeat("k", 32)),
		Contents: store, TrashSweepInterval: 10 * time.Millisecond})
	s.put("old.txt", "o")
	expect(t, s.do("DELETE", "/api/contents/old.txt", nil), http.StatusNoContent)
	clk.SetTime(clk.Now().Add(23 * time.Hour))
	s.put("new.txt", "n")
	expect(t, s.do("DELETE", "/api/contents/new.txt", nil), http.StatusNoContent)
	time.Sleep(50 * time.Millisecond)
	if got := len(s.trash()); got != 2 {
		t.Fatalf("%d entries before any expired", got)
	}
	clk.SetTime(clk.Now().Add(2 * time.Hour))
	testenv.Eventually(t, "the expired entry is swept", 10*time.Second, func() error {
		if list := s.trash(); len(list) != 1 || list[0].ID != "new.txt" {
			return fmt.Errorf("trash %+v", list)
		}
		return nil
	})
}
