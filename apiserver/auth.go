package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/securecookie"

	"github.com/nbkube/nbkube/internal/identity"
)

// User is who makes a request.
type User = identity.User

const (
	userKey      = "nbkube.user"
	tokenAuthKey = "nbkube.tokenAuthenticated"
	xsrfCookie   = "_xsrf"
	xsrfHeader   = "X-XSRFToken"
	// loginMaxAge is how long a login cookie stays valid, as Tornado's secure cookies.
	loginMaxAge = 30 * 24 * 3600
)

// errIdentityUnavailable answers a request whose credential no provider could check: the
// client may retry, and its credential may well be good.
var errIdentityUnavailable = &apiError{status: http.StatusServiceUnavailable, message: "the identity provider is unavailable"}

// authHeader matches "token <t>" and "bearer <t>", as Jupyter Server accepts them.
var authHeader = regexp.MustCompile(`(?i)^(?:token|bearer)\s+(.+)$`)

// authenticator decides who a request comes from: a token (header or ?token=) or a login
// cookie that an earlier ?token= request set. Cookie-authenticated requests that change
// state must also carry the XSRF token, since browsers send cookies with cross-site requests.
type authenticator struct {
	users   *identity.Cache
	cookies *securecookie.SecureCookie
	path    string
}

// loginCookie names the user, the provider that vouched and the fingerprint of the
// credentials it vouched for; each request re-validates them with the provider (through the
// cache), so a removed user or a rotated credential ends the login. What the user may do is
// not in it: the provider says that.
type loginCookie struct {
	Name       string
	Provider   string
	Credential string
}

func newAuthenticator(users *identity.Cache, secret []byte, basePath string) (*authenticator, error) {
	if len(secret) < 32 {
		return nil, errors.New("apiserver: the cookie secret needs at least 32 bytes")
	}
	sc := securecookie.New(secret, nil).MaxAge(loginMaxAge)
	return &authenticator{users: users, cookies: sc, path: basePath}, nil
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
	host := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, r.Host)
	return "nbkube-user-" + host
}

// identify returns the request's user, whether a token (rather than a cookie) proved it, and
// whether the token came in the URL. A token no provider knows leaves the cookie to decide; an
// error is a provider that could not answer.
func (a *authenticator) identify(r *http.Request) (*User, bool, bool, error) {
	if t, inURL := requestToken(r); t != "" {
		u, err := a.users.AuthenticateToken(r.Context(), t)
		if err != nil {
			return nil, false, false, err
		}
		if u != nil {
			return u, true, inURL, nil
		}
	}
	c, err := r.Cookie(cookieName(r))
	if err != nil {
		return nil, false, false, nil
	}
	var lc loginCookie
	if err := a.cookies.Decode(cookieName(r), c.Value, &lc); err != nil || lc.Name == "" {
		return nil, false, false, nil
	}
	u, err := a.current(r.Context(), &User{Name: lc.Name, Provider: lc.Provider, Credential: lc.Credential})
	return u, false, false, err
}

// current is the user as the provider that vouched for them knows them now; nil when the
// provider no longer knows them or their credentials changed since.
func (a *authenticator) current(ctx context.Context, u *User) (*User, error) {
	now, err := a.users.Lookup(ctx, u.Provider, u.Name)
	if err != nil || now == nil || subtle.ConstantTimeCompare([]byte(now.Credential), []byte(u.Credential)) != 1 {
		return nil, err
	}
	return now, nil
}

// login sets the login cookie and a fresh XSRF cookie after a ?token= request, so that a
// browser opening the printed URL stays logged in.
func (a *authenticator) login(c *gin.Context, u *User) error {
	value, err := a.cookies.Encode(cookieName(c.Request), loginCookie{Name: u.Name, Provider: u.Provider, Credential: u.Credential})
	if err != nil {
		return err
	}
	secure := c.Request.TLS != nil
	http.SetCookie(c.Writer, &http.Cookie{Name: cookieName(c.Request), Value: value, Path: a.path,
		MaxAge: loginMaxAge, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
	if _, err := c.Request.Cookie(xsrfCookie); err != nil {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		// Readable by scripts: clients copy it into the X-XSRFToken header.
		http.SetCookie(c.Writer, &http.Cookie{Name: xsrfCookie, Value: hex.EncodeToString(b), Path: a.path,
			Secure: secure, SameSite: http.SameSiteLaxMode})
	}
	return nil
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
// whose Origin is this server; cross-origin browser requests need a token.
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
	u, byToken, inURL, err := s.auth.identify(c.Request)
	if err != nil {
		s.opts.Log.Error(err, "Cannot authenticate a request", "path", c.Request.URL.Path)
		s.abortErr(c, errIdentityUnavailable)
		return
	}
	if u == nil {
		s.abortErr(c, forbidden("Forbidden"))
		return
	}
	if !byToken {
		if !sameOrigin(c.Request) {
			s.abortErr(c, forbidden("Blocking Cross Origin API request"))
			return
		}
		if !xsrfOK(c.Request) {
			s.abortErr(c, forbidden("'_xsrf' argument missing from "+c.Request.Method))
			return
		}
	}
	if inURL {
		if err := s.auth.login(c, u); err != nil {
			s.abortErr(c, err)
			return
		}
	}
	c.Set(userKey, u)
	c.Set(tokenAuthKey, byToken)
	c.Next()
}

// userOf is the authenticated user of the request.
func userOf(c *gin.Context) *User {
	u, _ := c.Get(userKey)
	user, _ := u.(*User)
	return user
}

// watchRevocation closes the returned channel when u's login is no longer good: the provider
// no longer knows the user, or their credentials changed. It checks every half TTL of the
// identity cache, so that revocation ends a connection within one and a half TTLs; the
// cache makes the many connections of one user cost one provider call per TTL. A provider
// that cannot answer leaves the connection open: an outage is no revocation. It stops when
// ctx ends.
func (a *authenticator) watchRevocation(ctx context.Context, u User, log func(error)) <-chan struct{} {
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
			now, err := a.current(ctx, &u)
			if err != nil {
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
