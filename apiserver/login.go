package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/identity"
)

// The login page and its form, logout, and the OAuth flow of the browser providers
// (JupyterHub, OpenID Connect): /login sends the browser to the provider with a state and a
// PKCE verifier kept in a short-lived encrypted cookie, and /oauth_callback takes the code
// the provider sends back and turns it into a login cookie.

//go:embed pages/login.html
var loginHTML string

var loginTemplate = template.Must(template.New("login").Parse(loginHTML))

// loginPage is what the login page shows.
type loginPage struct {
	Action, Next, XSRF string
	// Password asks for a user name beside the password: a provider checks passwords.
	Password bool
	// Providers are the browser providers to log in with.
	Providers      []loginLink
	Message, Error string
	Favicon        string
}

type loginLink struct{ Title, URL string }

// providerTitles name the browser providers on the login page.
var providerTitles = map[string]string{
	identity.KindJupyterHub: "JupyterHub",
	identity.KindOIDC:       "OpenID Connect",
}

// loginFlow is a browser login on its way through its provider.
type loginFlow struct {
	Provider, State, Verifier, Next string
}

// maxProviderError bounds what of a provider's error a refusal repeats.
const maxProviderError = 200

func (s *Server) callbackPath() string { return s.opts.BaseURL + "oauth_callback" }

// callbackURL is where providers send the browser back: under PublicURL when set (the
// address providers have registered), else under the address the request came to.
func (s *Server) callbackURL(r *http.Request) string {
	if s.opts.PublicURL != "" {
		return strings.TrimSuffix(s.opts.PublicURL, "/") + s.callbackPath()
	}
	scheme := "http"
	if s.viaHTTPS(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host + s.callbackPath()
}

func flowCookieName(r *http.Request) string { return "nbkube-login-" + hostPart(r) }

// safeNext is where to go after a login: next when it is a path of this server under the
// base URL, the base URL otherwise, so that a link cannot send a fresh login to another site.
func (s *Server) safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, s.opts.BaseURL) || strings.HasPrefix(next, "//") ||
		strings.ContainsRune(next, '\\') || strings.ContainsFunc(next, unicode.IsControl) {
		return s.opts.BaseURL
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || strings.Contains(u.Path+"/", "/../") {
		return s.opts.BaseURL
	}
	return next
}

// getLogin is GET /login: the browser goes to next when its login is good, to the provider
// when a browser provider is asked for (or is the only way to log in), and to the login
// page otherwise.
func (s *Server) getLogin(c *gin.Context) {
	next := s.safeNext(c.Query("next"))
	if kind := c.Query("provider"); kind != "" {
		s.startBrowserLogin(c, kind, next)
		return
	}
	if p := s.auth.loginOf(c.Request); p != nil {
		if u, err := s.auth.current(c.Request.Context(), p); err == nil && u != nil {
			c.Redirect(http.StatusFound, next)
			return
		}
	}
	chain := s.auth.users.Chain()
	if browsers := chain.Browser(); len(browsers) == 1 && !checksPasswords(chain) && !offersTokens(chain) {
		s.startBrowserLogin(c, browsers[0].Kind(), next)
		return
	}
	s.renderLogin(c, http.StatusOK, next, "", "")
}

// checksPasswords reports whether a provider of the chain checks passwords.
func checksPasswords(chain identity.Chain) bool {
	for _, p := range chain {
		if _, ok := p.(identity.PasswordProvider); ok {
			return true
		}
	}
	return false
}

// offersTokens reports whether the chain has the single-user token provider, whose users
// log in by pasting the token.
func offersTokens(chain identity.Chain) bool {
	for _, p := range chain {
		if p.Kind() == identity.KindToken {
			return true
		}
	}
	return false
}

func (s *Server) renderLogin(c *gin.Context, status int, next, message, failure string) {
	xsrf, err := s.auth.xsrfToken(c)
	if err != nil {
		s.abortErr(c, err)
		return
	}
	chain := s.auth.users.Chain()
	page := loginPage{Action: s.opts.BaseURL + "login", Next: next, XSRF: xsrf, Favicon: s.opts.BaseURL + faviconPath,
		Password: checksPasswords(chain), Message: message, Error: failure}
	for _, b := range chain.Browser() {
		title := providerTitles[b.Kind()]
		if title == "" {
			title = b.Kind()
		}
		q := url.Values{"provider": {b.Kind()}, "next": {next}}
		page.Providers = append(page.Providers, loginLink{Title: title, URL: s.opts.BaseURL + "login?" + q.Encode()})
	}
	c.Header("Cache-Control", "no-store")
	c.Status(status)
	c.Header("Content-Type", "text/html; charset=utf-8")
	if err := loginTemplate.Execute(c.Writer, page); err != nil {
		s.opts.Log.Error(err, "Cannot render the login page")
	}
}

// postLogin is POST /login, the login form: a user name and password for the providers that
// check passwords, or a token alone, as Jupyter's login form takes one. Only this server's
// own login page may post it: a form elsewhere would log the browser in as whoever that
// site chose, and what the victim then does lands in the attacker's account.
func (s *Server) postLogin(c *gin.Context) {
	if !s.fromOwnPages(c.Request) {
		s.abortErr(c, domainerr.Forbidden("Blocking a login from another site"))
		return
	}
	if !xsrfFormOK(c.Request) {
		s.abortErr(c, domainerr.Forbidden("'_xsrf' argument missing from POST"))
		return
	}
	next := s.safeNext(c.PostForm("next"))
	name, password := strings.TrimSpace(c.PostForm("username")), c.PostForm("password")
	if password == "" {
		s.renderLogin(c, http.StatusUnauthorized, next, "", "Invalid credentials")
		return
	}
	keys := s.loginKeys(c.Request, name)
	if wait := s.auth.beginLogin(keys); wait > 0 {
		seconds := retryAfterSeconds(wait)
		c.Header("Retry-After", strconv.Itoa(seconds))
		s.renderLogin(c, http.StatusTooManyRequests, next, "", loginWaitMessage(seconds))
		return
	}
	u, p, err := s.checkLogin(c.Request.Context(), name, password)
	// Counted before the answer is written: the client's next attempt must find it.
	s.auth.endLogin(keys, err == nil && u == nil, err == nil && u != nil)
	if err != nil {
		if c.Request.Context().Err() != nil {
			return
		}
		if isClaimed(err) {
			s.renderLogin(c, http.StatusForbidden, next, "", s.identityError(c, err).Error())
			return
		}
		s.opts.Log.Error(err, "Cannot check a login")
		s.abortErr(c, errIdentityUnavailable)
		return
	}
	if u == nil {
		s.renderLogin(c, http.StatusUnauthorized, next, "", "Invalid credentials")
		return
	}
	if err := s.auth.login(c, p); err != nil {
		s.abortErr(c, err)
		return
	}
	c.Redirect(http.StatusFound, next)
}

// checkLogin is the user of a name and password, or of a token alone (no name), and the proof
// of the login it makes; nil when they are not good.
func (s *Server) checkLogin(ctx context.Context, name, password string) (*User, proof, error) {
	if name == "" {
		u, err := s.auth.users.AuthenticateToken(ctx, password)
		if u == nil || err != nil {
			return nil, proof{}, err
		}
		return u, proof{Name: u.Name, Provider: u.Provider, Credential: u.Credential, Token: password}, nil
	}
	select {
	case s.auth.passwords <- struct{}{}:
	case <-ctx.Done():
		return nil, proof{}, ctx.Err()
	}
	u, err := s.auth.users.Chain().AuthenticatePassword(ctx, name, password)
	<-s.auth.passwords
	if u == nil || err != nil {
		return nil, proof{}, err
	}
	return u, proof{Name: u.Name, Provider: u.Provider, Credential: u.Credential}, nil
}

// fromOwnPages reports whether a browser sent the request from this server's own pages, or
// from none (an address typed in, a bookmark; or not a browser at all). Current browsers say
// so in Sec-Fetch-Site; older ones send Origin with a POST, and a Referer that the pages'
// Referrer-Policy keeps for this origin. "same-site" is refused too: a sibling subdomain is
// another party. A request with none of the three is not from another site's page in any
// browser that sends Sec-Fetch-Site.
func (s *Server) fromOwnPages(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return false
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		return s.isOwnOrigin(r, origin)
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		return s.isOwnOrigin(r, ref)
	}
	return true
}

// isOwnOrigin reports whether an Origin or Referer names this server: the host the request
// came to, or the public URL's. "null" (an opaque origin: a sandboxed frame, a data: page)
// names no server.
func (s *Server) isOwnOrigin(r *http.Request, address string) bool {
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	if s.opts.PublicURL == "" {
		return false
	}
	pub, err := url.Parse(s.opts.PublicURL)
	return err == nil && strings.EqualFold(u.Host, pub.Host)
}

// xsrfFormOK checks the XSRF token of a form against the browser's XSRF cookie.
func xsrfFormOK(r *http.Request) bool {
	c, err := r.Cookie(xsrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	sent := r.PostFormValue(xsrfCookie)
	if sent == "" {
		sent = r.Header.Get(xsrfHeader)
	}
	return sent != "" && subtle.ConstantTimeCompare([]byte(sent), []byte(c.Value)) == 1
}

// getLogout is GET /logout: it ends the browser's login and shows the login page. It stays a
// GET, as Notebook 6's pages link to it, but only a link of this server's pages (or the
// address typed in) may follow it: a link or an image elsewhere must not log the user out.
func (s *Server) getLogout(c *gin.Context) {
	if !s.fromOwnPages(c.Request) {
		s.abortErr(c, domainerr.Forbidden("Blocking a logout from another site"))
		return
	}
	s.auth.logout(c)
	s.renderLogin(c, http.StatusOK, s.opts.BaseURL, "You have logged out.", "")
}

// startBrowserLogin sends the browser to the provider of that kind, remembering the state and
// the PKCE verifier of the flow in a short-lived encrypted cookie.
func (s *Server) startBrowserLogin(c *gin.Context, kind, next string) {
	bp := browserProvider(s.auth.users.Chain(), kind)
	if bp == nil {
		s.abortErr(c, domainerr.NotFound("No login provider %q", kind))
		return
	}
	flow := loginFlow{Provider: kind, State: randomToken(), Verifier: randomToken(), Next: next}
	value, err := s.auth.flows.Encode(flowCookieName(c.Request), flow)
	if err != nil {
		s.abortErr(c, err)
		return
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: flowCookieName(c.Request), Value: value, Path: s.callbackPath(),
		MaxAge: int(loginFlowMaxAge.Seconds()), HttpOnly: true, Secure: s.viaHTTPS(c.Request), SameSite: http.SameSiteLaxMode})
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusFound, bp.LoginURL(s.callbackURL(c.Request), flow.State, flow.Verifier))
}

// finishBrowserLogin is GET /oauth_callback, where a provider sends the browser back.
func (s *Server) finishBrowserLogin(c *gin.Context) {
	var flow loginFlow
	ck, err := c.Request.Cookie(flowCookieName(c.Request))
	if err != nil || s.auth.flows.Decode(flowCookieName(c.Request), ck.Value, &flow) != nil {
		s.abortErr(c, domainerr.Invalid("No login is under way in this browser (it began over %v ago, or in another browser): log in again", loginFlowMaxAge))
		return
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: flowCookieName(c.Request), Value: "", Path: s.callbackPath(),
		MaxAge: -1, HttpOnly: true, Secure: s.viaHTTPS(c.Request), SameSite: http.SameSiteLaxMode})
	if e := c.Query("error"); e != "" {
		msg := e
		if d := c.Query("error_description"); d != "" {
			msg += ": " + d
		}
		if len(msg) > maxProviderError {
			msg = msg[:maxProviderError]
		}
		s.abortErr(c, domainerr.Forbidden("The identity provider refused the login: %s", strings.ToValidUTF8(msg, "")))
		return
	}
	state, code := c.Query("state"), c.Query("code")
	if state == "" || code == "" || subtle.ConstantTimeCompare([]byte(state), []byte(flow.State)) != 1 {
		s.abortErr(c, domainerr.Invalid("The provider's answer does not belong to this browser's login: log in again"))
		return
	}
	bp := browserProvider(s.auth.users.Chain(), flow.Provider)
	if bp == nil {
		s.abortErr(c, domainerr.Invalid("No login provider %q", flow.Provider))
		return
	}
	l, err := bp.FinishLogin(c.Request.Context(), s.callbackURL(c.Request), code, flow.Verifier)
	if err != nil {
		s.opts.Log.V(1).Info("A browser login failed", "provider", flow.Provider, "error", err.Error())
		s.abortErr(c, domainerr.Forbidden("The identity provider did not confirm the login"))
		return
	}
	// The login's user must not have a name another provider's user has, as every request
	// of the login will check again.
	l.User.Provider = bp.Kind()
	if err := s.auth.users.Chain().CheckClaims(l.User); err != nil {
		s.abortErr(c, s.identityError(c, err))
		return
	}
	p := proof{Name: l.User.Name, Provider: bp.Kind(), Credential: l.User.Credential, Token: l.Token}
	if !l.Expiry.IsZero() {
		p.Expires = l.Expiry.Unix()
	}
	if err := s.auth.login(c, p); err != nil {
		s.abortErr(c, domainerr.Forbidden("The identity provider's login has expired"))
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Redirect(http.StatusFound, s.safeNext(flow.Next))
}

func browserProvider(chain identity.Chain, kind string) identity.BrowserProvider {
	for _, b := range chain.Browser() {
		if b.Kind() == kind {
			return b
		}
	}
	return nil
}

// randomToken is 32 random bytes, base64url: a state or a PKCE verifier (43 characters, as
// RFC 7636 asks at least).
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
