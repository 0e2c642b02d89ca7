package apiserver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/nbkube/nbkube/internal/identity"
)

// The login form's throttle: every failed login counts against the user name tried and
// against the client's address. Past a few failures each further attempt must wait, twice as
// long after each failure: per name, so that guessing one user's password from many
// addresses is slow; per address, so that trying a few passwords on many names from one
// client is slow. A throttled attempt checks nothing and tells nothing: the same answer
// whether the name exists or the password would have been right.
var (
	// loginNameThrottle: five mistakes are free; then 1 s, 2 s, ... up to five minutes
	// between guesses, forgotten after a quarter of an hour without one. A login clears the
	// name's failures.
	loginNameThrottle = identity.ThrottleOptions{Free: 5, Delay: time.Second, MaxDelay: 5 * time.Minute,
		Forget: 15 * time.Minute, Size: 10000}
	// loginAddressThrottle: many people may share an address (an office's NAT, a proxy
	// not among the trusted ones), so more mistakes are free, one is forgiven every minute,
	// and a login does not clear them: else a guesser with an account of their own would
	// clear their address between guesses.
	loginAddressThrottle = identity.ThrottleOptions{Free: 20, Delay: time.Second, MaxDelay: 5 * time.Minute,
		Forgive: time.Minute, Forget: 15 * time.Minute, Size: 10000}
)

// loginKeys are the throttle keys of a login attempt: the name's (none for a token alone),
// hashed so that a long name cannot make the throttle big, and the client's address.
type loginKeys struct{ name, address string }

func (s *Server) loginKeys(r *http.Request, name string) loginKeys {
	k := loginKeys{address: clientAddress(r, s.auth.proxies)}
	if name != "" {
		sum := sha256.Sum256([]byte(name))
		k.name = hex.EncodeToString(sum[:16])
	}
	return k
}

// beginLogin says whether a login attempt may be checked now: 0, and endLogin must follow,
// or how long the client must wait.
func (a *authenticator) beginLogin(k loginKeys) time.Duration {
	if wait := a.loginNames.Begin(k.name); wait > 0 {
		return wait
	}
	if wait := a.loginAddresses.Begin(k.address); wait > 0 {
		a.loginNames.End(false, []string{k.name})
		return wait
	}
	return 0
}

// endLogin counts the outcome of an attempt that beginLogin let through: a failure against
// both keys, a success clears the name's failures. An attempt that was not decided (the
// provider could not answer, the client went away) counts as neither.
func (a *authenticator) endLogin(k loginKeys, failed, succeeded bool) {
	var reset []string
	if succeeded {
		reset = []string{k.name}
	}
	a.loginNames.End(failed, []string{k.name}, reset...)
	a.loginAddresses.End(failed, []string{k.address})
}

// retryAfterSeconds is a wait in whole seconds, rounded up: a client that waits that long is
// let through.
func retryAfterSeconds(wait time.Duration) int {
	return int(max(1, (wait+time.Second-1)/time.Second))
}

// loginWaitMessage tells the user how long to wait.
func loginWaitMessage(seconds int) string {
	if seconds == 1 {
		return "Too many failed logins: try again in a second."
	}
	return fmt.Sprintf("Too many failed logins: try again in %d seconds.", seconds)
}

// clientAddress is the address a request came from, as a throttle key: the peer's, or, when
// the peer is a trusted proxy, the nearest address in X-Forwarded-For that is not one (the
// left part of the header is the client's to write). An IPv6 client is its /64, which one
// machine usually has whole.
func clientAddress(r *http.Request, proxies trustedProxies) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	addr = addr.Unmap()
	if len(proxies) > 0 && proxies.contain(r.RemoteAddr) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break
			}
			addr = hop.Unmap()
			if !proxies.contain(net.JoinHostPort(addr.String(), "0")) {
				break
			}
		}
	}
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}
