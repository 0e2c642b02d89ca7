package apiserver_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/identity"
)

// throttledServer serves ann (password "correct horse") from a users file, with a fake clock,
// behind a proxy it trusts (the test client), so that X-Forwarded-For says which address
// each login comes from.
func throttledServer(t *testing.T) (*testServer, *clocktesting.FakePassiveClock, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "users.yaml")
	writePasswordsFile(t, path, map[string]string{"ann": "correct horse"})
	users, err := identity.NewUsersFile(path, identity.UsersFileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	s := newServer(t, func(o *apiserver.Options) {
		o.Providers = []identity.Provider{users}
		o.Clock = clk
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	browser(t, s)
	return s, clk, loginForm(t, s)
}

// loginFrom posts the login form as the client at address, behind the trusted proxy.
func loginFrom(t *testing.T, s *testServer, address, xsrf, name, password string) response {
	t.Helper()
	return s.do("POST", "/login", url.Values{"username": {name}, "password": {password}, "_xsrf": {xsrf}}.Encode(),
		"Authorization", "", "Content-Type", "application/x-www-form-urlencoded", "X-Forwarded-For", address)
}

// expectWait checks a throttled login: 429, Retry-After in seconds, and the login page saying
// so.
func expectWait(t *testing.T, r response, seconds int) {
	t.Helper()
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != fmt.Sprint(seconds) {
		t.Fatalf("%d, Retry-After %q; want 429 and %d; %s", r.status, r.header.Get("Retry-After"), seconds, r.body)
	}
	if !strings.Contains(string(r.body), "Too many failed logins") || !strings.Contains(string(r.body), `name="password"`) {
		t.Errorf("the throttled login's page: %s", r.body)
	}
}

func TestLogin_FailedPasswordsOfANameWaitLongerEachTimeUntilALogin(t *testing.T) {
	s, clk, xsrf := throttledServer(t)
	for i := range 5 {
		expect401 := loginFrom(t, s, "203.0.113.1", xsrf, "ann", fmt.Sprintf("guess %d", i))
		if expect401.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401 (the first five are free)", i, expect401.status)
		}
	}
	// The name waits, from any address, even with the right password: a throttled attempt
	// is not checked, so it tells nothing.
	expectWait(t, loginFrom(t, s, "198.51.100.7", xsrf, "ann", "correct horse"), 1)
	expectWait(t, loginFrom(t, s, "203.0.113.1", xsrf, "ann", "guess 6"), 1)
	// The wait doubles with each failure.
	for _, wait := range []int{1, 2, 4, 8} {
		clk.SetTime(clk.Now().Add(time.Duration(wait) * time.Second))
		if r := loginFrom(t, s, "203.0.113.1", xsrf, "ann", "another guess"); r.status != http.StatusUnauthorized {
			t.Fatalf("a guess after waiting %ds: %d, want 401", wait, r.status)
		}
		expectWait(t, loginFrom(t, s, "203.0.113.1", xsrf, "ann", "correct horse"), 2*wait)
	}
	// A name of no user is throttled alike: the answer does not tell which names exist.
	for range 5 {
		loginFrom(t, s, "192.0.2.1", xsrf, "nobody", "guess")
	}
	expectWait(t, loginFrom(t, s, "192.0.2.2", xsrf, "nobody", "guess"), 1)

	// Once the wait is over, the right password logs in and clears the name's failures.
	clk.SetTime(clk.Now().Add(16 * time.Second))
	if r := loginFrom(t, s, "198.51.100.7", xsrf, "ann", "correct horse"); r.status != http.StatusFound {
		t.Fatalf("the right password after the wait: %d, want 302; %s", r.status, r.body)
	}
	for i := range 4 {
		if r := loginFrom(t, s, "198.51.100.7", xsrf, "ann", "typo"); r.status != http.StatusUnauthorized {
			t.Fatalf("mistake %d after a login: %d, want 401", i, r.status)
		}
	}
	if r := loginFrom(t, s, "198.51.100.7", xsrf, "ann", "correct horse"); r.status != http.StatusFound {
		t.Errorf("after a login the failures start again from none: %d, want 302", r.status)
	}
}

func TestLogin_AnAddressTryingManyNamesWaits(t *testing.T) {
	s, clk, xsrf := throttledServer(t)
	// Two guesses each on many names, from one address: every name stays under its own
	// limit, the address does not.
	for i := range 20 {
		if r := loginFrom(t, s, "203.0.113.9", xsrf, fmt.Sprintf("user%d", i/2), "123456"); r.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, r.status)
		}
	}
	expectWait(t, loginFrom(t, s, "203.0.113.9", xsrf, "ann", "correct horse"), 1)
	// The token field counts against the address too.
	r := s.do("POST", "/login", url.Values{"password": {"made-up token"}, "_xsrf": {xsrf}}.Encode(),
		"Authorization", "", "Content-Type", "application/x-www-form-urlencoded", "X-Forwarded-For", "203.0.113.9")
	expectWait(t, r, 1)
	// Other addresses are not held up; the address's wait ends.
	if r := loginFrom(t, s, "198.51.100.7", xsrf, "ann", "correct horse"); r.status != http.StatusFound {
		t.Errorf("another address: %d, want 302", r.status)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if r := loginFrom(t, s, "203.0.113.9", xsrf, "ann", "correct horse"); r.status != http.StatusFound {
		t.Errorf("after the wait: %d, want 302", r.status)
	}
	// An address that is not a proxy's cannot choose its X-Forwarded-For.
	direct := newServer(t, func(o *apiserver.Options) { o.Clock = clk })
	browser(t, direct)
	dx := loginForm(t, direct)
	for i := range 20 {
		direct.do("POST", "/login", url.Values{"password": {fmt.Sprintf("guess %d", i)}, "_xsrf": {dx}}.Encode(),
			"Authorization", "", "Content-Type", "application/x-www-form-urlencoded", "X-Forwarded-For", fmt.Sprintf("192.0.2.%d", i))
	}
	r = direct.do("POST", "/login", url.Values{"password": {testToken}, "_xsrf": {dx}}.Encode(),
		"Authorization", "", "Content-Type", "application/x-www-form-urlencoded", "X-Forwarded-For", "192.0.2.200")
	expectWait(t, r, 1)
}
