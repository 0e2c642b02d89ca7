package testenv

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// JupyterHubBin is Debian's jupyterhub (hack/install-test-deps.sh installs it).
const JupyterHubBin = "/usr/bin/jupyterhub"

// Hub is a real JupyterHub for a test, with nbkube registered as its service "nbkube".
type Hub struct {
	// APIURL is the Hub's API, as its services are told (JUPYTERHUB_API_URL).
	APIURL string
	// ServiceToken is the "nbkube" service's token; its role grants read:users.
	ServiceToken string
	// adminToken is a second service's, with the rights to manage users and tokens.
	adminToken string
}

// HubConfig is the Hub's users: Users ordinary, Admins admin; Groups maps a group to its
// members.
type HubConfig struct {
	Users, Admins []string
	Groups        map[string][]string
}

// StartJupyterHub starts Debian's jupyterhub with the dummy authenticator on free local
// ports in a temporary directory, and stops it when the test ends. Without the jupyterhub
// package the test is skipped, except under CI, where it fails: CI must not skip silently.
func StartJupyterHub(t *testing.T, cfg HubConfig) *Hub {
	t.Helper()
	if _, err := os.Stat(JupyterHubBin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing (run hack/install-test-deps.sh): %v", JupyterHubBin, err)
		}
		t.Skipf("%s is missing: apt-get install jupyterhub (hack/install-test-deps.sh) to run this test", JupyterHubBin)
	}
	dir := t.TempDir()
	h := &Hub{ServiceToken: randomHex(t), adminToken: randomHex(t)}
	hubPort, proxyPort, proxyAPIPort := freePort(t), freePort(t), freePort(t)
	h.APIURL = fmt.Sprintf("http://127.0.0.1:%d/hub/api", hubPort)
	groups := cfg.Groups
	if groups == nil {
		groups = map[string][]string{}
	}
	if cfg.Users == nil {
		cfg.Users = []string{}
	}
	if cfg.Admins == nil {
		cfg.Admins = []string{}
	}
	py := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	conf := strings.Join([]string{
		"c = get_config()",
		"c.JupyterHub.authenticator_class = 'jupyterhub.auth.DummyAuthenticator'",
		"c.Authenticator.allowed_users = set(" + py(cfg.Users) + ")",
		"c.Authenticator.admin_users = set(" + py(cfg.Admins) + ")",
		"c.JupyterHub.load_groups = " + py(groups),
		fmt.Sprintf("c.JupyterHub.bind_url = 'http://127.0.0.1:%d'", proxyPort),
		fmt.Sprintf("c.JupyterHub.hub_bind_url = 'http://127.0.0.1:%d'", hubPort),
		fmt.Sprintf("c.ConfigurableHTTPProxy.api_url = 'http://127.0.0.1:%d'", proxyAPIPort),
		"c.JupyterHub.db_url = 'sqlite:///" + filepath.Join(dir, "hub.sqlite") + "'",
		"c.JupyterHub.cookie_secret_file = '" + filepath.Join(dir, "cookie_secret") + "'",
		"c.ConfigurableHTTPProxy.pid_file = '" + filepath.Join(dir, "proxy.pid") + "'",
		"c.JupyterHub.services = [{'name': 'nbkube', 'api_token': '" + h.ServiceToken + "'}, {'name': 'test-admin', 'api_token': '" + h.adminToken + "'}]",
		"c.JupyterHub.load_roles = [" +
			"{'name': 'nbkube', 'scopes': ['read:users'], 'services': ['nbkube']}, " +
			"{'name': 'test-admin', 'scopes': ['admin:users', 'tokens'], 'services': ['test-admin']}]",
		"",
	}, "\n")
	if err := os.WriteFile(filepath.Join(dir, "jupyterhub_config.py"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "hub.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(JupyterHubBin, "-f", filepath.Join(dir, "jupyterhub_config.py"))
	cmd.Dir = dir
	// Debian's configurable-http-proxy finds its modules there even when the node on PATH is
	// not Debian's.
	cmd.Env = append(os.Environ(), "NODE_PATH=/usr/share/nodejs")
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so that the proxy it starts goes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		_ = log.Close()
	})
	dumpLog := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "hub.log"))
		return string(b)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("jupyterhub exited: %v\n%s", waitErr, dumpLog())
		default:
		}
		if code, _ := h.call("GET", "/users", h.adminToken, nil); code == http.StatusOK {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("jupyterhub did not answer within 90s\n%s", dumpLog())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// call makes an API request of the Hub, returning the status and the body.
func (h *Hub) call(method, path, token string, body any) (int, []byte) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.APIURL+path, r)
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Authorization", "token "+token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// admin makes an API request as the Hub's admin service, failing the test unless the
// answer is want.
func (h *Hub) admin(t *testing.T, method, path string, body any, want int) []byte {
	t.Helper()
	code, b := h.call(method, path, h.adminToken, body)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	return b
}

// UserToken creates an API token of the user through the Hub's API, returning the token and
// its id.
func (h *Hub) UserToken(t *testing.T, user string) (token, id string) {
	t.Helper()
	b := h.admin(t, "POST", "/users/"+url.PathEscape(user)+"/tokens", map[string]any{"note": "nbkube test"}, http.StatusCreated)
	var m struct{ Token, ID string }
	if err := json.Unmarshal(b, &m); err != nil || m.Token == "" {
		t.Fatalf("the Hub's new token %s: %v", b, err)
	}
	return m.Token, m.ID
}

// RevokeToken deletes the user's token of that id.
func (h *Hub) RevokeToken(t *testing.T, user, id string) {
	t.Helper()
	h.admin(t, "DELETE", "/users/"+url.PathEscape(user)+"/tokens/"+url.PathEscape(id), nil, http.StatusNoContent)
}

// RemoveUser deletes the user from the Hub.
func (h *Hub) RemoveUser(t *testing.T, user string) {
	t.Helper()
	h.admin(t, "DELETE", "/users/"+url.PathEscape(user), nil, http.StatusNoContent)
}

func randomHex(t *testing.T) string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// freePort is a local port free when asked.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
