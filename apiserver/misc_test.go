package apiserver_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/identity"
)

func TestMe_IsTheUserAsTheirProviderKnowsThem(t *testing.T) {
	identityOf := func(r response) map[string]any {
		t.Helper()
		expect(t, r, http.StatusOK)
		id, _ := r.json(t)["identity"].(map[string]any)
		return id
	}
	want := map[string]any{"username": "alice", "name": "alice", "display_name": "alice", "initials": "A", "avatar_url": nil, "color": nil}
	if got := identityOf(newServer(t).do("GET", "/api/me", nil)); !reflect.DeepEqual(got, want) {
		t.Errorf("token user: %v, want %v", got, want)
	}

	tok := userToken(t, "ann")
	h, err := identity.HashSecret(tok)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "users.yaml")
	if err := os.WriteFile(path, []byte("users:\n- name: ann\n  display_name: Ann Lee\n  token_hash: '"+h+"'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	users, err := identity.NewUsersFile(path, identity.UsersFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, func(o *apiserver.Options) { o.Providers = []identity.Provider{users} })
	want = map[string]any{"username": "ann", "name": "Ann Lee", "display_name": "Ann Lee", "initials": "AL", "avatar_url": nil, "color": nil}
	if got := identityOf(s.do("GET", "/api/me", nil, "Authorization", "token "+tok)); !reflect.DeepEqual(got, want) {
		t.Errorf("users-file user: %v, want %v", got, want)
	}
}

// Jupyter Server 2 answers each resource asked about with the actions allowed of those asked.
func TestMe_PermissionsAnswerWhatWasAskedAbout(t *testing.T) {
	s := newServer(t)
	permissionsOf := func(q string) any {
		t.Helper()
		r := s.do("GET", "/api/me?permissions="+url.QueryEscape(q), nil)
		expect(t, r, http.StatusOK)
		return r.json(t)["permissions"]
	}
	if got := permissionsOf(""); !reflect.DeepEqual(got, map[string]any{}) {
		t.Errorf("nothing asked: %v", got)
	}
	got := permissionsOf(`{"kernels":["read","execute","fly","read"],"contents":["write"],"terminals":["read","write"],"nope":[]}`)
	want := map[string]any{
		"kernels":   []any{"read", "execute", "read"},
		"contents":  []any{"write"},
		"terminals": []any{},
		"nope":      []any{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("permissions %v, want %v", got, want)
	}

	// As Jupyter Server's own test asks: each value JSON-encoded once more.
	for _, bad := range []string{"", "[]", `"abc"`, `{"resource": "action"}`, `{"resource": [5]}`, `{"resource": {}}`} {
		q, _ := json.Marshal(bad)
		r := s.do("GET", "/api/me?permissions="+url.QueryEscape(string(q)), nil)
		expect(t, r, http.StatusBadRequest)
		if msg, _ := r.json(t)["message"].(string); !strings.Contains(msg, `permissions should be a JSON dict of {"resource": ["action",]}, got '`) {
			t.Errorf("%s: %s", q, r.body)
		}
	}
}
