package apiserver_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/homes"
	"github.com/nbkube/nbkube/internal/identity"
)

// homesServer is an API server over a real store whose users ann and ben have homes from
// template, and root is an admin; as(user) are the headers that authenticate as user.
func homesServer(t *testing.T, template string, opts ...serverOption) (*testServer, func(user string) []string) {
	t.Helper()
	tpl, err := homes.Parse(template)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{"ann": userToken(t, "ann"), "ben": userToken(t, "ben"), "root": userToken(t, "root")}
	path := filepath.Join(t.TempDir(), "users.yaml")
	writeUsersFile(t, path, tokens, "root")
	users, err := identity.NewUsersFile(path, identity.UsersFileOptions{CheckEvery: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, append([]serverOption{func(o *apiserver.Options) {
		o.Providers = []identity.Provider{users}
		o.Homes = tpl
	}}, opts...)...)
	return s, func(user string) []string { return []string{"Authorization", "token " + tokens[user]} }
}

// listing is the names in a directory model.
func listing(t *testing.T, r response) []string {
	t.Helper()
	expect(t, r, http.StatusOK)
	var m struct {
		Content []struct{ Name string }
	}
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range m.Content {
		names = append(names, e.Name)
	}
	return names
}

const annSecret = "ann's secret"

func TestHomes_EachUserSeesOnlyTheirHomeAndTheAdminSeesAll(t *testing.T) {
	s, as := homesServer(t, "users/{username}")
	nb := `{"type":"notebook","content":{"cells":[{"cell_type":"markdown","id":"a","metadata":{},"source":"` + annSecret + `"}],"metadata":{},"nbformat":4,"nbformat_minor":5}}`
	expect(t, s.do("PUT", "/api/contents/x.ipynb", nb, as("ann")...), http.StatusCreated)
	expect(t, s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"`+annSecret+`"}`, as("ann")...), http.StatusCreated)
	if data, err := os.ReadFile(filepath.Join(s.root, "users", "ann", "x.ipynb")); err != nil || !strings.Contains(string(data), annSecret) {
		t.Fatalf("ann's notebook is not in her home: %v", err)
	}
	if got := listing(t, s.do("GET", "/api/contents", nil, as("ann")...)); !slices.Equal(got, []string{"f.txt", "x.ipynb"}) {
		t.Fatalf("ann's root lists %v", got)
	}
	if got := listing(t, s.do("GET", "/api/contents", nil, as("ben")...)); len(got) != 0 {
		t.Fatalf("ben's root lists %v", got)
	}
	m := s.do("GET", "/api/contents/x.ipynb", nil, as("ann")...).json(t)
	if m["path"] != "x.ipynb" {
		t.Fatalf("ann's notebook has path %v, want one relative to her home", m["path"])
	}
	for _, p := range []string{"/api/contents/x.ipynb", "/files/f.txt", "/nbconvert/script/x.ipynb"} {
		r := s.do("GET", p, nil, as("ben")...)
		if r.status != http.StatusNotFound || strings.Contains(string(r.body), annSecret) {
			t.Errorf("ben's GET %s: %d %s", p, r.status, r.body)
		}
		expect(t, s.do("GET", p, nil, as("ann")...), http.StatusOK)
	}

	// The admin's root is the volume's: every home, by its path.
	if got := listing(t, s.do("GET", "/api/contents/users", nil, as("root")...)); !slices.Equal(got, []string{"ann", "ben"}) {
		t.Fatalf("the admin lists homes %v", got)
	}
	expect(t, s.do("GET", "/api/contents/users/ann/x.ipynb", nil, as("root")...), http.StatusOK)
	expect(t, s.do("GET", "/files/users/ann/f.txt", nil, as("root")...), http.StatusOK)

	// Trash: per home, and ann's own.
	expect(t, s.do("DELETE", "/api/contents/f.txt", nil, as("ann")...), http.StatusNoContent)
	for user, want := range map[string]int{"ann": 1, "ben": 0, "root": 0} {
		var entries []any
		r := s.do("GET", "/api/trash", nil, as(user)...)
		expect(t, r, http.StatusOK)
		if err := json.Unmarshal(r.body, &entries); err != nil || len(entries) != want {
			t.Errorf("%s's trash: %s, want %d entries", user, r.body, want)
		}
	}
	if _, err := os.Stat(filepath.Join(s.root, "users", "ann", ".nbkube", "trash", "ann")); err != nil {
		t.Errorf("ann's trash is not in her home: %v", err)
	}
}

func TestHomes_OlderNotebooksInterfaceIsPerHome(t *testing.T) {
	s, as := homesServer(t, "{username}")
	r := s.do("POST", "/notebooks?name=mine", nil, as("ann")...)
	expect(t, r, http.StatusCreated)
	var id string
	if err := json.Unmarshal(r.body, &id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.root, "ann", "mine.ipynb")); err != nil {
		if _, err := os.Stat(filepath.Join(s.root, "ann", "Untitled.ipynb")); err != nil {
			t.Fatalf("ann's new notebook is not in her home")
		}
	}
	expect(t, s.do("GET", "/notebooks/"+id, nil, as("ann")...), http.StatusOK)
	expect(t, s.do("GET", "/notebooks/"+id, nil, as("ben")...), http.StatusNotFound)
	expect(t, s.do("DELETE", "/notebooks/"+id, nil, as("ben")...), http.StatusNotFound)
	for user, want := range map[string]int{"ann": 1, "ben": 0} {
		var list []any
		r := s.do("GET", "/notebooks", nil, as(user)...)
		expect(t, r, http.StatusOK)
		if err := json.Unmarshal(r.body, &list); err != nil || len(list) != want {
			t.Errorf("%s's /notebooks: %s, want %d", user, r.body, want)
		}
	}
}

// TestHomes_NoPathOrLinkReachesAnotherHome tries, as ben, every name that could lead to
// ann's files or to the store's own directory: ".." in its forms, and the links ben's
// kernel, which mounts his home, could make in it.
func TestHomes_NoPathOrLinkReachesAnotherHome(t *testing.T) {
	s, as := homesServer(t, "{username}")
	expect(t, s.do("PUT", "/api/contents/x.ipynb", `{"type":"notebook","content":{"cells":[{"cell_type":"markdown","id":"a","metadata":{},"source":"`+annSecret+`"}],"metadata":{},"nbformat":4,"nbformat_minor":5}}`, as("ann")...), http.StatusCreated)
	expect(t, s.do("PUT", "/api/contents/n.ipynb", `{"type":"notebook","content":{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}}`, as("ben")...), http.StatusCreated)
	r := s.do("POST", "/notebooks", nil, as("ben")...) // gives ben's home a .nbkube/ids
	expect(t, r, http.StatusCreated)
	ben := filepath.Join(s.root, "ben")
	links := map[string]string{
		"toann": "../ann", "up": "..", "abs": s.root, "annabs": filepath.Join(s.root, "ann"),
		"annnb": "../ann/x.ipynb", "meta": ".nbkube", "metaids": ".nbkube/ids",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ben, name)); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{
		"../ann/x.ipynb", "%2e%2e/ann/x.ipynb", "%2E%2E%2Fann%2Fx.ipynb", "..%2fann%2fx.ipynb",
		"toann/x.ipynb", "up/ann/x.ipynb", "abs/ann/x.ipynb", "annabs/x.ipynb", "annnb",
		"meta", "meta/ids", "metaids/by-path/n.ipynb", ".nbkube/ids",
	}
	refused := []int{http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound}
	for _, p := range paths {
		for _, route := range []string{"/api/contents/", "/files/", "/nbconvert/script/", "/api/contents/%s/checkpoints"} {
			u := route + p
			if strings.Contains(route, "%s") {
				u = strings.Replace(route, "%s", p, 1)
			}
			r := s.do("GET", u, nil, as("ben")...)
			// Checkpoints are listed from ben's own .ipynb_checkpoints: none, whatever the name.
			empty := strings.Contains(route, "checkpoints") && strings.TrimSpace(string(r.body)) == "[]"
			if !empty && !slices.Contains(refused, r.status) || strings.Contains(string(r.body), annSecret) {
				t.Errorf("ben's GET %s: %d %s", u, r.status, r.body)
			}
		}
		r := s.do("PUT", "/api/contents/"+p, `{"type":"file","format":"text","content":"planted"}`, as("ben")...)
		if !slices.Contains(refused, r.status) {
			t.Errorf("ben's PUT %s: %d %s", p, r.status, r.body)
		}
		if strings.Contains(p, "%") {
			continue // a name of its own in a JSON body
		}
		r = s.do("PATCH", "/api/contents/n.ipynb", map[string]string{"path": p}, as("ben")...)
		if r.status < 400 {
			t.Errorf("ben's rename to %s: %d %s", p, r.status, r.body)
			s.do("PATCH", "/api/contents/"+p, map[string]string{"path": "n.ipynb"}, as("ben")...)
		}
	}
	if got := listing(t, s.do("GET", "/api/contents", nil, as("ben")...)); !slices.Equal(got, []string{"Untitled.ipynb", "n.ipynb"}) {
		t.Errorf("ben's listing shows %v", got)
	}
	if data, err := os.ReadFile(filepath.Join(s.root, "ann", "x.ipynb")); err != nil || !strings.Contains(string(data), annSecret) {
		t.Fatalf("ann's notebook changed: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(s.root, "ann"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "x.ipynb" && e.Name() != ".ipynb_checkpoints" {
			t.Errorf("ann's home gained %s", e.Name())
		}
	}
}

func TestHomes_OffEveryoneSharesTheRoot(t *testing.T) {
	s, as := homesServer(t, "")
	expect(t, s.do("PUT", "/api/contents/x.txt", `{"type":"file","format":"text","content":"shared"}`, as("ann")...), http.StatusCreated)
	expect(t, s.do("GET", "/api/contents/x.txt", nil, as("ben")...), http.StatusOK)
	if _, err := os.Stat(filepath.Join(s.root, "x.txt")); err != nil {
		t.Fatal(err)
	}
}

// A home's view is opened per request and closed with it: many requests leave no open
// descriptors behind.
func TestHomes_ViewsAreClosedAfterTheirRequests(t *testing.T) {
	s, as := homesServer(t, "{username}")
	expect(t, s.do("PUT", "/api/contents/f.txt", `{"type":"file","format":"text","content":"x"}`, as("ann")...), http.StatusCreated)
	openFDs := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	expect(t, s.do("GET", "/api/contents", nil, as("ann")...), http.StatusOK)
	before := openFDs()
	for range 200 {
		expect(t, s.do("GET", "/api/contents/f.txt", nil, as("ann")...), http.StatusOK)
		expect(t, s.do("GET", "/files/f.txt", nil, as("ann")...), http.StatusOK)
	}
	if after := openFDs(); after > before+5 {
		t.Fatalf("open descriptors grew from %d to %d over 400 requests", before, after)
	}
}
