package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// HydraVersion is the ORY Hydra that hack/build-hydra.sh builds (hack/tools/hydra/go.mod).
const HydraVersion = "v2.3.0"

// HydraBin is the Hydra binary: $NBKUBE_HYDRA, else where hack/build-hydra.sh puts it.
func HydraBin() string {
	if bin := os.Getenv("NBKUBE_HYDRA"); bin != "" {
		return bin
	}
	cache := os.Getenv("NBKUBE_CACHE_DIR")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			base = filepath.Join(os.Getenv("HOME"), ".cache")
		}
		cache = filepath.Join(base, "nbkube")
	}
	return filepath.Join(cache, "tools", "hydra-"+HydraVersion)
}

// HydraUser is a user of the test's login app.
type HydraUser struct {
	Password string
	// DisplayName is the "name" claim; none when empty.
	DisplayName string
	// Email is the "email" claim; none when empty.
	Email string
	// Groups is the "groups" claim.
	Groups []string
}

// HydraConfig configures a test's Hydra.
type HydraConfig struct {
	// Users maps a user's name (the "preferred_username" claim) to the user. Hydra's subject
	// of a user is HydraSubject(name), so that a client mistaking the subject for the name
	// is caught.
	Users map[string]HydraUser
	// AccessTokenTTL is how long access tokens live; Hydra's default (an hour) when zero.
	AccessTokenTTL time.Duration
}

// HydraSubject is the subject ("sub" claim) Hydra gives the user of that name.
func HydraSubject(name string) string { return "subject-of-" + name }

// Hydra is a real ORY Hydra for a test, in development mode with an in-memory database,
// with a login and consent app served by the test process.
type Hydra struct {
	// IssuerURL is Hydra's issuer, as its discovery document says it.
	IssuerURL string
	// PublicURL and AdminURL are Hydra's public and admin APIs.
	PublicURL, AdminURL string
	// LoginAppURL is the login and consent app.
	LoginAppURL string
	users       map[string]HydraUser
	stop        func()
}

// Stop stops Hydra before the test ends, for tests of a provider that does not answer.
func (h *Hydra) Stop() { h.stop() }

// StartHydra starts Hydra (`hydra serve all --dev`) on free local ports in a temporary
// directory and stops it when the test ends; its output goes to the test's log if the test
// fails. Without the binary (hack/build-hydra.sh builds it) the test is skipped, except under
// CI, where it fails: CI must not skip silently.
func StartHydra(t *testing.T, cfg HydraConfig) *Hydra {
	t.Helper()
	bin := HydraBin()
	if _, err := os.Stat(bin); err != nil {
		Missing(t, "Hydra is missing at %s: run hack/build-hydra.sh (or set NBKUBE_HYDRA) to run this test", bin)
	}
	h := &Hydra{users: cfg.Users}
	app := httptest.NewServer(h.loginApp(t))
	t.Cleanup(app.Close)
	h.LoginAppURL = app.URL

	dir := t.TempDir()
	publicPort, adminPort := freePort(t), freePort(t)
	h.PublicURL = fmt.Sprintf("http://127.0.0.1:%d", publicPort)
	h.AdminURL = fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	env := map[string]string{
		"DSN":                     "memory",
		"SERVE_PUBLIC_HOST":       "127.0.0.1",
		"SERVE_PUBLIC_PORT":       fmt.Sprint(publicPort),
		"SERVE_ADMIN_HOST":        "127.0.0.1",
		"SERVE_ADMIN_PORT":        fmt.Sprint(adminPort),
		"URLS_SELF_ISSUER":        h.PublicURL,
		"URLS_SELF_PUBLIC":        h.PublicURL,
		"URLS_LOGIN":              app.URL + "/login",
		"URLS_CONSENT":            app.URL + "/consent",
		"URLS_ERROR":              app.URL + "/error",
		"SECRETS_SYSTEM":          `["` + randomHex(t) + `"]`,
		"STRATEGIES_ACCESS_TOKEN": "opaque",
		// The scopes a client may ask for beyond Hydra's own (openid, offline_access),
		// advertised in the discovery document.
		"WEBFINGER_OIDC_DISCOVERY_SUPPORTED_SCOPE": `["profile","email","groups"]`,
		"LOG_LEVEL":   "info",
		"SQA_OPT_OUT": "true",
	}
	if cfg.AccessTokenTTL > 0 {
		env["TTL_ACCESS_TOKEN"] = cfg.AccessTokenTTL.String()
	}
	cmd := exec.Command(bin, "serve", "all", "--dev", "--sqa-opt-out")
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	srv := StartServer(t, "hydra", cmd, filepath.Join(dir, "hydra.log"), 10*time.Second)
	h.stop = srv.Stop
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-srv.Exited():
			t.Fatalf("hydra exited: %v", srv.ExitErr())
		default:
		}
		if code, _ := call(http.MethodGet, h.AdminURL+"/health/ready", nil); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("hydra was not ready within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	code, body := call(http.MethodGet, h.PublicURL+"/.well-known/openid-configuration", nil)
	var disc struct{ Issuer string }
	if err := json.Unmarshal(body, &disc); code != http.StatusOK || err != nil || disc.Issuer == "" {
		t.Fatalf("hydra's discovery document: %d %s: %v", code, body, err)
	}
	h.IssuerURL = disc.Issuer
	return h
}

// call makes a JSON request, returning the status and the body; status 0 when there was
// no answer.
func call(method, u string, body any) (int, []byte) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, []byte(err.Error())
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		return 0, []byte(err.Error())
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

// admin makes a request of Hydra's admin API, decoding the answer into out (when not nil);
// it fails the test unless the answer is want.
func (h *Hydra) admin(t *testing.T, method, path string, body, out any, want int) {
	t.Helper()
	if err := h.adminCall(method, path, body, out, want); err != nil {
		t.Fatal(err)
	}
}

func (h *Hydra) adminCall(method, path string, body, out any, want int) error {
	code, b := call(method, h.AdminURL+path, body)
	if code != want {
		return fmt.Errorf("hydra %s %s: %d %s, want %d", method, path, code, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("hydra %s %s: %w", method, path, err)
		}
	}
	return nil
}

// CreateClient registers an OAuth 2 client for the authorization code flow coming back to
// redirectURL, with a secret sent by HTTP basic authentication (Hydra refuses it in the
// body), allowed the scopes openid, offline_access, profile, email and groups.
func (h *Hydra) CreateClient(t *testing.T, redirectURL string) (id, secret string) {
	t.Helper()
	id, secret = h.createClient(t, redirectURL, "client_secret_basic")
	if secret == "" {
		t.Fatalf("hydra's new client has no secret")
	}
	return id, secret
}

// CreatePublicClient registers a client as CreateClient does, but a public one: it has no
// secret, and only PKCE binds its codes to it.
func (h *Hydra) CreatePublicClient(t *testing.T, redirectURL string) (id string) {
	t.Helper()
	id, _ = h.createClient(t, redirectURL, "none")
	return id
}

func (h *Hydra) createClient(t *testing.T, redirectURL, authMethod string) (id, secret string) {
	t.Helper()
	var c struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	h.admin(t, http.MethodPost, "/admin/clients", map[string]any{
		"client_name":                "nbkube test",
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"redirect_uris":              []string{redirectURL},
		"scope":                      "openid offline_access profile email groups",
		"token_endpoint_auth_method": authMethod,
	}, &c, http.StatusCreated)
	if c.ClientID == "" {
		t.Fatalf("hydra's new client has no id")
	}
	return c.ClientID, c.ClientSecret
}

// Revoke revokes the consent sessions of the user of that name with every client, and with
// them the user's access and refresh tokens.
func (h *Hydra) Revoke(t *testing.T, name string) {
	t.Helper()
	h.admin(t, http.MethodDelete, "/admin/oauth2/auth/sessions/consent?all=true&subject="+url.QueryEscape(HydraSubject(name)), nil, nil, http.StatusNoContent)
}

var loginForm = template.Must(template.New("login").Parse(`<!doctype html>
<title>Log in</title>
{{if .Error}}<p class="error">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="challenge" value="{{.Challenge}}">
<label>Username <input name="username"></label>
<label>Password <input type="password" name="password"></label>
<button type="submit">Log in</button>
</form>
`))

// loginApp is Hydra's login and consent app: a login form checking the configured users, and
// a consent that grants what the client asked for with the user's claims in the ID token
// (which Hydra's userinfo endpoint also answers).
func (h *Hydra) loginApp(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	fail := func(w http.ResponseWriter, err error) {
		t.Logf("hydra login app: %v", err)
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		challenge := r.URL.Query().Get("login_challenge")
		var req struct {
			Skip    bool   `json:"skip"`
			Subject string `json:"subject"`
		}
		if err := h.adminCall(http.MethodGet, "/admin/oauth2/auth/requests/login?login_challenge="+url.QueryEscape(challenge), nil, &req, http.StatusOK); err != nil {
			fail(w, err)
			return
		}
		if req.Skip {
			h.acceptLogin(w, r, challenge, req.Subject)
			return
		}
		_ = loginForm.Execute(w, map[string]string{"Challenge": challenge})
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		challenge, name, password := r.PostFormValue("challenge"), r.PostFormValue("username"), r.PostFormValue("password")
		if u, ok := h.users[name]; !ok || u.Password != password {
			w.WriteHeader(http.StatusUnauthorized)
			_ = loginForm.Execute(w, map[string]string{"Challenge": challenge, "Error": "wrong username or password"})
			return
		}
		h.acceptLogin(w, r, challenge, HydraSubject(name))
	})
	mux.HandleFunc("GET /consent", func(w http.ResponseWriter, r *http.Request) {
		challenge := r.URL.Query().Get("consent_challenge")
		var req struct {
			Subject  string   `json:"subject"`
			Scope    []string `json:"requested_scope"`
			Audience []string `json:"requested_access_token_audience"`
		}
		if err := h.adminCall(http.MethodGet, "/admin/oauth2/auth/requests/consent?consent_challenge="+url.QueryEscape(challenge), nil, &req, http.StatusOK); err != nil {
			fail(w, err)
			return
		}
		claims := map[string]any{}
		for name, u := range h.users {
			if HydraSubject(name) != req.Subject {
				continue
			}
			claims["preferred_username"] = name
			claims["groups"] = append([]string{}, u.Groups...)
			if u.DisplayName != "" {
				claims["name"] = u.DisplayName
			}
			if u.Email != "" {
				claims["email"] = u.Email
			}
		}
		var accepted struct {
			RedirectTo string `json:"redirect_to"`
		}
		if err := h.adminCall(http.MethodPut, "/admin/oauth2/auth/requests/consent/accept?consent_challenge="+url.QueryEscape(challenge), map[string]any{
			"grant_scope":                 req.Scope,
			"grant_access_token_audience": req.Audience,
			"session":                     map[string]any{"id_token": claims},
		}, &accepted, http.StatusOK); err != nil {
			fail(w, err)
			return
		}
		http.Redirect(w, r, accepted.RedirectTo, http.StatusFound)
	})
	mux.HandleFunc("GET /error", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "hydra: "+r.URL.Query().Get("error")+": "+r.URL.Query().Get("error_description"), http.StatusBadRequest)
	})
	return mux
}

func (h *Hydra) acceptLogin(w http.ResponseWriter, r *http.Request, challenge, subject string) {
	var accepted struct {
		RedirectTo string `json:"redirect_to"`
	}
	if err := h.adminCall(http.MethodPut, "/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(challenge),
		map[string]any{"subject": subject}, &accepted, http.StatusOK); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	http.Redirect(w, r, accepted.RedirectTo, http.StatusFound)
}

// Login logs the user in as a browser would, with a fresh cookie jar: see LoginWith.
func (h *Hydra) Login(t *testing.T, loginURL, user, password string) *url.URL {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return h.LoginWith(t, &http.Client{Jar: jar}, loginURL, user, password)
}

// LoginWith logs the user in as a browser with c's cookie jar would: from loginURL (Hydra's
// authorization endpoint, or a page of the client that redirects there) it follows the
// redirects, fills in and posts the login form, passes the consent, and returns where Hydra
// finally sends the browser: the client's redirect URL with the code, or with an error. That
// last redirect is not followed, so the caller makes that request itself (with c's cookies).
// The test fails when the flow ends anywhere else, e.g. a refused password.
func (h *Hydra) LoginWith(t *testing.T, c *http.Client, loginURL, user, password string) *url.URL {
	t.Helper()
	ours := map[string]bool{}
	for _, u := range []string{h.PublicURL, h.LoginAppURL} {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		ours[p.Host] = true
	}
	client := *c
	client.Timeout = 30 * time.Second
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	next, err := url.Parse(loginURL)
	if err != nil {
		t.Fatal(err)
	}
	method, form := http.MethodGet, url.Values(nil)
	passedHydra := false
	for range 20 {
		if passedHydra && !ours[next.Host] {
			return next
		}
		passedHydra = passedHydra || ours[next.Host]
		var resp *http.Response
		if method == http.MethodPost {
			resp, err = client.PostForm(next.String(), form)
		} else {
			resp, err = client.Get(next.String())
		}
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = resp.Body.Close()
		method, form = http.MethodGet, nil
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			loc, err := resp.Location()
			if err != nil {
				t.Fatalf("login: %s %s: %v", resp.Request.Method, resp.Request.URL.Redacted(), err)
			}
			next = loc
		case resp.StatusCode == http.StatusOK && ours[next.Host] && strings.HasPrefix(next.Path, "/login") && bytes.Contains(body, []byte(`name="challenge"`)):
			challenge := formValue(string(body), "challenge")
			form = url.Values{"challenge": {challenge}, "username": {user}, "password": {password}}
			method = http.MethodPost
			next = next.ResolveReference(&url.URL{Path: "/login"})
		default:
			t.Fatalf("login: %s %s: %s\n%s", resp.Request.Method, resp.Request.URL.Redacted(), resp.Status, body)
		}
	}
	t.Fatalf("login: more than 20 steps")
	return nil
}

// formValue is the value of the login form's hidden input of that name.
func formValue(page, name string) string {
	_, rest, ok := strings.Cut(page, `name="`+name+`" value="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return html.UnescapeString(v)
}
