package apiserver_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/identity"
	"github.com/nbkube/nbkube/internal/testenv"
)

// changingUsers is a provider whose users an administrator changes while the server runs:
// what the authenticator must notice. It stands in for the users file (whose own tests use
// the real file) so that these tests claim only the API server's side.
type changingUsers struct {
	mu     sync.Mutex
	tokens map[string]string // name → token
	down   bool
}

func (p *changingUsers) Kind() string { return "changing" }

func (p *changingUsers) set(name, token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if token == "" {
		delete(p.tokens, name)
		return
	}
	p.tokens[name] = token
}

func (p *changingUsers) AuthenticateToken(_ context.Context, token string) (*identity.User, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return nil, errors.New("connection refused")
	}
	for name, t := range p.tokens {
		if t == token {
			return &identity.User{Name: name, Credential: identity.Fingerprint(t)}, nil
		}
	}
	return nil, nil
}

func (p *changingUsers) Lookup(_ context.Context, name string) (*identity.User, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return nil, errors.New("connection refused")
	}
	t, ok := p.tokens[name]
	if !ok {
		return nil, nil
	}
	return &identity.User{Name: name, Credential: identity.Fingerprint(t)}, nil
}

const authTTL = 200 * time.Millisecond

func withChangingUsers(p *changingUsers) serverOption {
	return func(o *apiserver.Options) {
		o.Providers = []identity.Provider{p}
		o.IdentityCache = identity.CacheOptions{TTL: authTTL, NegativeTTL: authTTL}
	}
}

func TestAuth_LoginCookieEndsWhenTheTokenRotatesOrTheUserGoes(t *testing.T) {
	p := &changingUsers{tokens: map[string]string{"ann": "ann-token-1"}}
	s := newServer(t, withChangingUsers(p))
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s.hc.Jar = jar
	cookieOnly := func() response { return s.do("GET", "/api/contents", nil, "Authorization", "") }

	expect(t, s.do("GET", "/api/status?token=ann-token-1", nil, "Authorization", ""), http.StatusOK)
	expect(t, cookieOnly(), http.StatusOK)
	p.set("ann", "ann-token-2")
	testenv.Eventually(t, "the rotated token's cookie refused", 5*authTTL, func() error {
		if r := cookieOnly(); r.status != http.StatusForbidden {
			return errors.New(http.StatusText(r.status))
		}
		return nil
	})
	expect(t, cookieOnly(), http.StatusForbidden)
	expect(t, s.do("GET", "/api/status", nil, "Authorization", "token ann-token-1"), http.StatusForbidden)

	// The new token logs in again, until the user is removed.
	expect(t, s.do("GET", "/api/status?token=ann-token-2", nil, "Authorization", ""), http.StatusOK)
	expect(t, cookieOnly(), http.StatusOK)
	p.set("ann", "")
	testenv.Eventually(t, "the removed user's cookie refused", 5*authTTL, func() error {
		if r := cookieOnly(); r.status != http.StatusForbidden {
			return errors.New(http.StatusText(r.status))
		}
		return nil
	})
}

func TestAuth_AProviderThatCannotAnswerIs503NotForbidden(t *testing.T) {
	p := &changingUsers{tokens: map[string]string{"ann": "ann-token"}, down: true}
	s := newServer(t, withChangingUsers(p))
	r := s.do("GET", "/api/status", nil, "Authorization", "token ann-token")
	expect(t, r, http.StatusServiceUnavailable)
	if strings.Contains(string(r.body), "refused") {
		t.Errorf("the provider's error reaches the client: %s", r.body)
	}
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
	expect(t, s.do("GET", "/api/status", nil, "Authorization", "token ann-token"), http.StatusOK)
}

// expectPolicyClose reads ws until it ends, within 10 s, and fails unless the server closed it
// with 1008 (policy violation), as it does when the connection's user is revoked.
func expectPolicyClose(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
				t.Fatalf("the revoked user's connection ended with %v, want a policy-violation close", err)
			}
			return
		}
	}
}

// kernelServer is an API server of the providers (their answers cached for authTTL) with one
// real kernel, k1, listening on l (a fresh port when nil).
func kernelServer(t *testing.T, l net.Listener, providers ...identity.Provider) *testServer {
	t.Helper()
	ep := startAgent(t)
	return newServerOn(t, l, t.TempDir(), func(o *apiserver.Options) {
		o.Providers = providers
		o.IdentityCache = identity.CacheOptions{TTL: authTTL, NegativeTTL: authTTL}
		o.Kernels = &oneKernel{id: "k1", ep: ep}
	})
}

// dialK1 opens k1's channels for session with the headers (name and value pairs, as s.do
// takes them; empty values are left out).
func dialK1(t *testing.T, s *testServer, session string, headers ...string) *websocket.Conn {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			h.Set(headers[i], headers[i+1])
		}
	}
	ws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(s.url, "http")+"/api/kernels/k1/channels?session_id="+session, h)
	if err != nil {
		t.Fatalf("dial: %v %v", err, resp)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

// checkRevocationClosesOnlyTheirs: the two users' connections run while several
// re-validations pass; revoke ends the first user's, whose connection then closes with 1008,
// and the second's still runs.
func checkRevocationClosesOnlyTheirs(t *testing.T, revoked, other *websocket.Conn, revoke func()) {
	t.Helper()
	time.Sleep(4 * authTTL)
	if got := execute(t, revoked, false, "1+1"); got != "2" {
		t.Fatalf("1+1 = %q", got)
	}
	revoke()
	expectPolicyClose(t, revoked)
	if got := execute(t, other, false, "2+2"); got != "4" {
		t.Errorf("the other user's connection after the revocation: 2+2 = %q", got)
	}
}

func TestAuth_RevokedUsersChannelsAreClosed(t *testing.T) {
	p := &changingUsers{tokens: map[string]string{"ann": "ann-token", "ben": "ben-token"}}
	s := kernelServer(t, nil, p)
	ann, ben := dialK1(t, s, "ann", "Authorization", "token ann-token"), dialK1(t, s, "ben", "Authorization", "token ben-token")
	checkRevocationClosesOnlyTheirs(t, ann, ben, func() { p.set("ann", "") })
}
