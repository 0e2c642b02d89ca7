package apiserver

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/securecookie"
	"k8s.io/utils/clock"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/identity"
)

// User is who makes a request.
type User = identity.User

const (
	userKey      = "nbkube.user"
	proofKey     = "nbkube.proof"
	tokenAuthKey = "nbkube.tokenAuthenticated"
	xsrfCookie   = "_xsrf"
	xsrfHeader   = "X-XSRFToken"
	// loginMaxAge is how long a login cookie stays valid, as Tornado's secure cookies.
	loginMaxAge = 30 * 24 * 3600
	// loginFlowMaxAge bounds the time from sending a browser to its provider to its return.
	loginFlowMaxAge = 10 * time.Minute
)

// errIdentityUnavailable answers a request whose credential no provider could check: the
// client may retry, and its credential may well be good.
var errIdentityUnavailable = domainerr.Unavailable("the identity provider is unavailable")

// authHeader matches "token <t>" and "bearer <t>", as Jupyter Server accepts them.
var authHeader = regexp.MustCompile(`(?i)^(?:token|bearer)\s+(.+)$`)

// authenticator decides who a request comes from: a token (header or ?token=) or a login
// cookie that an earlier login set (?token=, the login form, or a browser provider's OAuth
// flow). Cookie-authenticated requests that change state must also carry the XSRF token,
// since browsers send cookies with cross-site requests.
type authenticator struct {
	users *identity.Cache
	// cookies signs and encrypts login cookies: a browser provider's login holds its access
	// token, which only nbkube may read.
	cookies *securecookie.SecureCookie
	// flows keeps a browser login's state and PKCE verifier between the redirect to the
	// provider and its return, for a few minutes.
	flows *securecookie.SecureCookie
	path  string
	clock clock.PassiveClock
	// passwords bounds the password checks running at once: each is a deliberately slow hash.
	passwords chan struct{}
	// loginNames and loginAddresses slow down the guessing of passwords at the login form
	// (loginthrottle.go).
	loginNames, loginAddresses *identity.Throttle
	// proxies tell which requests came over HTTPS, for Secure cookies.
	proxies trustedProxies
}

// proof is what showed who a request comes from, kept to re-validate it while the request's
// connection lasts: a login cookie's content, or the token a request presented.
type proof struct {
	Name       string
	Provider   string
	Credential string
	// Token is what the provider re-validates the login by: a browser login's access token,
	// or the request's own token. Without it the provider is asked for the user by name
	// and the credential fingerprint must still match, so a rotated credential ends the
	// login.
	Token string `json:",omitempty"`
	// Expires (Unix seconds) ends the login whatever the provider says; 0 for never.
	Expires int64 `json:",omitempty"`
}

// cookieKeys derives the signing and the encryption key of cookies from the one secret
// every replica shares.
func cookieKeys(secret []byte) (hash, block []byte) {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("nbkube cookie encryption"))
	return secret, m.Sum(nil)
}

func newAuthenticator(users *identity.Cache, secret []byte, basePath string, clk clock.PassiveClock) (*authenticator, error) {
	if len(secret) < 32 {
		return nil, errors.New("apiserver: the cookie secret needs at least 32 bytes")
	}
	hash, block := cookieKeys(secret)
	names, addresses := loginNameThrottle, loginAddressThrottle
	names.Clock, addresses.Clock = clk, clk
	return &authenticator{
		users:          users,
		cookies:        securecookie.New(hash, block).MaxAge(loginMaxAge),
		flows:          securecookie.New(hash, block).MaxAge(int(loginFlowMaxAge / time.Second)),
		path:           basePath,
		clock:          clk,
		passwords:      make(chan struct{}, max(1, runtime.GOMAXPROCS(0))),
		loginNames:     identity.NewThrottle(names),
		loginAddresses: identity.NewThrottle(addresses),
	}, nil
}

// requestToken is the token the request presents, and whether it came in the URL.
func requestToken(r *http.Request) (string, bool) {
	if m := authHeader.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		return strings.TrimSpace(m[1]), false
	}
	if t := r.URL.Query().Get("token"); t != "" {
		return t, true
	}
	return "", false
}

// cookieName includes the host (and port): cookies are shared by all ports of a host, and two
// servers on one machine must not overwrite each other's logins.
func cookieName(r *http.Request) string {
	return "nbkube-user-" + hostPart(r)
}

func hostPart(r *http.Request) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, r.Host)
}

// requester is who a request comes from, and how it showed it.
type requester struct {
	// user is nil when the request proved no one.
	user *User
	// proof is what proved the user: the token, or the login cookie's contents.
	proof *proof
	// byToken tells that a token, rather than a login cookie, proved the user; inURL that
	// the token came in the URL (?token=).
	byToken, inURL bool
}

// identify tells who the request comes from. A token no provider knows leaves the cookie to
// decide; an error is a provider that could not answer.
func (a *authenticator) identify(r *http.Request) (requester, error) {
	if t, inURL := requestToken(r); t != "" {
		u, err := a.users.AuthenticateToken(r.Context(), t)
		if err != nil {
			return requester{}, err
		}
		if u != nil {
			return requester{user: u, proof: &proof{Name: u.Name, Provider: u.Provider, Credential: u.Credential, Token: t},
				byToken: true, inURL: inURL}, nil
		}
	}
	p := a.loginOf(r)
	if p == nil {
		return requester{}, nil
	}
	u, err := a.current(r.Context(), p)
	return requester{user: u, proof: p}, err
}

// loginOf is the request's login cookie; nil when it has none or it is not one of ours.
func (a *authenticator) loginOf(r *http.Request) *proof {
	c, err := r.Cookie(cookieName(r))
	if err != nil {
		return nil
	}
	var p proof
	if err := a.cookies.Decode(cookieName(r), c.Value, &p); err != nil || p.Name == "" {
		return nil
	}
	return &p
}

// current is the user as the provider that vouched for them knows them now; nil when the
// login has expired, the provider no longer accepts its token or knows the user, or the
// user's credentials changed since.
func (a *authenticator) current(ctx context.Context, p *proof) (*User, error) {
	if p.Expires != 0 && a.clock.Now().Unix() >= p.Expires {
		return nil, nil
	}
	var now *User
	var err error
	if p.Token != "" {
		now, err = a.users.AuthenticateToken(ctx, p.Token)
	} else {
		now, err = a.users.Lookup(ctx, p.Provider, p.Name)
	}
	if err != nil || now == nil || now.Name != p.Name || now.Provider != p.Provider ||
		subtle.ConstantTimeCompare([]byte(now.Credential), []byte(p.Credential)) != 1 {
		return nil, err
	}
	return now, nil
}

// login sets the login cookie of p and a fresh XSRF cookie: after a ?token= request, so
// that a browser opening the printed URL stays logged in, and after the login form or a
// browser provider's flow. A token that made the login is kept in the cookie, encrypted, so
// that any replica re-validates it with the provider; a password is not: the provider is
// asked for the user by name instead.
func (a *authenticator) login(c *gin.Context, p proof) error {
	maxAge := loginMaxAge
	if p.Expires != 0 {
		maxAge = min(maxAge, int(p.Expires-a.clock.Now().Unix()))
		if maxAge <= 0 {
			return errors.New("apiserver: the login has expired already")
		}
	}
	value, err := a.cookies.Encode(cookieName(c.Request), p)
	if err != nil {
		return err
	}
	secure := a.proxies.viaHTTPS(c.Request)
	http.SetCookie(c.Writer, &http.Cookie{Name: cookieName(c.Request), Value: value, Path: a.path,
		MaxAge: maxAge, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	_, err = a.xsrfToken(c)
	return err
}

// logout ends the browser's login.
func (a *authenticator) logout(c *gin.Context) {
	http.SetCookie(c.Writer, &http.Cookie{Name: cookieName(c.Request), Value: "", Path: a.path,
		MaxAge: -1, HttpOnly: true, Secure: a.proxies.viaHTTPS(c.Request), SameSite: http.SameSiteLaxMode})
}

// xsrfToken is the browser's XSRF token, set as a cookie when it has none yet.
func (a *authenticator) xsrfToken(c *gin.Context) (string, error) {
	if old, err := c.Request.Cookie(xsrfCookie); err == nil && old.Value != "" {
		return old.Value, nil
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	t := hex.EncodeToString(b)
	// Readable by scripts: clients copy it into the X-XSRFToken header.
	http.SetCookie(c.Writer, &http.Cookie{Name: xsrfCookie, Value: t, Path: a.path,
		Secure: a.proxies.viaHTTPS(c.Request), SameSite: http.SameSiteLaxMode})
	return t, nil
}

// xsrfOK checks the double-submitted XSRF token of a cookie-authenticated request.
func xsrfOK(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	c, err := r.Cookie(xsrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	sent := r.Header.Get(xsrfHeader)
	if sent == "" {
		sent = r.URL.Query().Get(xsrfCookie)
	}
	return sent != "" && subtle.ConstantTimeCompare([]byte(sent), []byte(c.Value)) == 1
}

// sameOrigin accepts requests without an Origin header (not from a browser page) and those
// whose Origin is this server; cross-origin browser requests need a token (and must not come
// from an opaque origin: opaqueOrigin).
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// authenticate is the middleware of every authenticated route.
func (s *Server) authenticate(c *gin.Context) {
	if opaqueOrigin(c.Request) {
		s.abortErr(c, domainerr.Forbidden("Blocking a request from an opaque origin (a sandboxed page or a local file)"))
		return
	}
	id, err := s.auth.identify(c.Request)
	if err != nil {
		s.abortErr(c, s.identityError(c, err))
		return
	}
	u := id.user
	if u == nil {
		s.abortErr(c, domainerr.Forbidden("Forbidden"))
		return
	}
	if !id.byToken {
		if !sameOrigin(c.Request) {
			s.abortErr(c, domainerr.Forbidden("Blocking Cross Origin API request"))
			return
		}
		// The XSRF cookie is a session cookie and the login lasts 30 days: after a browser
		// restart the login is there and the XSRF cookie is not. Any answer to the login
		// issues a new one, the refusal of a change that lacked it too, so that the page's
		// scripts can send the change again.
		if _, err := s.auth.xsrfToken(c); err != nil {
			s.abortErr(c, err)
			return
		}
		if !xsrfOK(c.Request) {
			s.abortErr(c, domainerr.Forbidden("'_xsrf' argument missing from %s", c.Request.Method))
			return
		}
	}
	if id.inURL {
		if err := s.auth.login(c, *id.proof); err != nil {
			s.abortErr(c, err)
			return
		}
		// A page must not keep the token in its address, where its scripts read it: a user's
		// HTML in /files could send it elsewhere.
		if navigation(c.Request) {
			c.Header("Cache-Control", "no-store")
			c.Redirect(http.StatusFound, withoutToken(c.Request.URL))
			c.Abort()
			return
		}
	}
	c.Set(userKey, u)
	c.Set(proofKey, id.proof)
	c.Set(tokenAuthKey, id.byToken)
	c.Next()
}

// proofOf is what proved the request's user.
func proofOf(c *gin.Context) *proof {
	p, _ := c.Get(proofKey)
	pr, _ := p.(*proof)
	return pr
}

// userOf is the authenticated user of the request.
func userOf(c *gin.Context) *User {
	u, _ := c.Get(userKey)
	user, _ := u.(*User)
	return user
}

// watchRevocation closes the returned channel when the login p proved is no longer good: it
// expired, the provider no longer accepts its token or knows the user, or their credentials
// changed, or another provider's user has their name now. It checks every half TTL of the
// identity cache, so that revocation ends a connection within one and a half TTLs; the
// cache makes the many connections of one user cost one provider call per TTL. A provider
// that cannot answer leaves the connection open: an outage is no revocation. It stops when
// ctx ends.
func (a *authenticator) watchRevocation(ctx context.Context, p proof, log func(error)) <-chan struct{} {
	revoked := make(chan struct{})
	go func() {
		t := time.NewTicker(a.users.TTL() / 2)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now, err := a.current(ctx, &p)
			if err != nil && !isClaimed(err) {
				log(err)
				continue
			}
			if now == nil {
				close(revoked)
				return
			}
		}
	}()
	return revoked
}
