package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"
)

// jupyterAPI is a client of a Jupyter server's REST API, authenticated with the server's
// token: nbkube's, in every deployment the tests make, and Debian's Jupyter Server's, which
// the gateway test drives the same way. Its kernel channels are jupyterWS's.
type jupyterAPI struct {
	// base is the server's base URL, ending in "/".
	base, token string
	hc          *http.Client
}

// newJupyterAPI is a client of the API at base (ending in "/") with token; timeout bounds
// each request.
func newJupyterAPI(base, token string, timeout time.Duration) *jupyterAPI {
	return &jupyterAPI{base: base, token: token, hc: &http.Client{Timeout: timeout}}
}

// apiResponse is an answer read in full.
type apiResponse struct {
	// request is the method and URL that got this answer, for failure messages.
	request string
	status  int
	header  http.Header
	body    []byte
}

// maxAnswerBytes bounds the answers read: the tests' models are small.
const maxAnswerBytes = 16 << 20

// request is a request of route (relative to the base URL) with the token and a JSON body
// (none when nil).
func (a *jupyterAPI) request(t testing.TB, method, route string, body any) *http.Request {
	t.Helper()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	// Not t.Context(): cleanups make requests too, after it is done.
	req, err := http.NewRequestWithContext(context.Background(), method, a.base+route, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

func (a *jupyterAPI) do(t testing.TB, req *http.Request) apiResponse {
	t.Helper()
	return doRequest(t, a.hc, req)
}

func doRequest(t testing.TB, hc *http.Client, req *http.Request) apiResponse {
	t.Helper()
	what := describe(req)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		t.Fatalf("%s: read the body: %v", what, err)
	}
	return apiResponse{request: what, status: resp.StatusCode, header: resp.Header, body: body}
}

// describe names a request in failure messages, without the token a login URL carries.
func describe(req *http.Request) string {
	u := *req.URL
	if q := u.Query(); q.Has("token") {
		q.Set("token", "redacted")
		u.RawQuery = q.Encode()
	}
	return req.Method + " " + u.Redacted()
}

// call makes a request with the token and a JSON body (none when nil).
func (a *jupyterAPI) call(t testing.TB, method, route string, body any) apiResponse {
	t.Helper()
	return a.do(t, a.request(t, method, route, body))
}

// getJSON decodes the answer to GET route, which must be 200 OK, into v.
func (a *jupyterAPI) getJSON(t testing.TB, route string, v any) {
	t.Helper()
	a.call(t, http.MethodGet, route, nil).want(t, http.StatusOK).decode(t, v)
}

// want fails the test unless the status is status.
func (r apiResponse) want(t testing.TB, status int) apiResponse {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: HTTP %d, want %d: %s", r.request, r.status, status, r.body)
	}
	return r
}

func (r apiResponse) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("%s: decode %s: %v", r.request, r.body, err)
	}
}

// jupyterError checks that the answer is Jupyter's JSON error and returns it.
func (r apiResponse) jupyterError(t testing.TB) jupyterErrorBody {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type %q, want JSON", ct)
	}
	var fields map[string]json.RawMessage
	r.decode(t, &fields)
	if _, ok := fields["reason"]; !ok {
		t.Errorf("error %s has no reason", r.body)
	}
	var e jupyterErrorBody
	r.decode(t, &e)
	if e.Message == "" {
		t.Errorf("error %s has no message", r.body)
	}
	return e
}

type jupyterErrorBody struct {
	Message string  `json:"message"`
	Reason  *string `json:"reason"`
}

// statusTimeout bounds one GET /api/status of a server that is starting: a request that
// reached a server not yet serving must not use up the whole wait.
const statusTimeout = 2 * time.Second

// answers asks GET /api/status once and says why the answer is not 200 OK.
func (a *jupyterAPI) answers(t testing.TB) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	resp, err := a.hc.Do(a.request(t, http.MethodGet, "api/status", nil).WithContext(ctx))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /api/status: HTTP %d", resp.StatusCode)
	}
	return nil
}

// wsURL is the WebSocket URL of route.
func (a *jupyterAPI) wsURL(route string) string {
	return "ws" + strings.TrimPrefix(a.base+route, "http")
}

// kernelIDs are the ids of the kernels the API lists.
func (a *jupyterAPI) kernelIDs(t testing.TB) []string {
	t.Helper()
	var list []struct {
		ID string `json:"id"`
	}
	a.getJSON(t, "api/kernels", &list)
	ids := make([]string, 0, len(list))
	for _, k := range list {
		ids = append(ids, k.ID)
	}
	return ids
}

// startKernel starts a python3 kernel, deleted when the test ends.
func (a *jupyterAPI) startKernel(t testing.TB) string {
	t.Helper()
	var k struct {
		ID string `json:"id"`
	}
	a.call(t, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}).want(t, http.StatusCreated).decode(t, &k)
	t.Cleanup(func() { a.deleteQuietly("api/kernels/" + k.ID) })
	return k.ID
}

// deleteQuietly deletes what a test leaves behind; the test has its outcome already.
func (a *jupyterAPI) deleteQuietly(route string) {
	req, err := http.NewRequest(http.MethodDelete, a.base+route, nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "token "+a.token)
	if resp, err := a.hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

// sessionModel is the part of Jupyter's session model the tests read.
type sessionModel struct {
	ID     string `json:"id"`
	Path   string `json:"path"`
	Name   string `json:"name"`
	Type   string `json:"type"`
	Kernel *struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"kernel"`
}

// sessionsAt are the sessions the API lists of the notebook at path.
func (a *jupyterAPI) sessionsAt(t testing.TB, path string) []sessionModel {
	t.Helper()
	var list, out []sessionModel
	a.getJSON(t, "api/sessions", &list)
	for _, s := range list {
		if s.Path == path {
			out = append(out, s)
		}
	}
	return out
}

// legacyNotebook is a notebook of the older IPython interface's GET /notebooks.
type legacyNotebook struct {
	NotebookID string  `json:"notebook_id"`
	Name       string  `json:"name"`
	KernelID   *string `json:"kernel_id"`
}

// legacyNotebook is the notebook with id in GET /notebooks.
func (a *jupyterAPI) legacyNotebook(t testing.TB, id string) legacyNotebook {
	t.Helper()
	var list []legacyNotebook
	a.getJSON(t, "notebooks", &list)
	for _, nb := range list {
		if nb.NotebookID == id {
			return nb
		}
	}
	t.Fatalf("GET /notebooks %+v lacks %s", list, id)
	return legacyNotebook{}
}

// cookieClient is a client logged in by cookie, as a browser is after opening the printed URL.
type cookieClient struct {
	base string
	hc   *http.Client
}

func (a *jupyterAPI) loggedInBrowser(t testing.TB) *cookieClient {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &cookieClient{base: a.base, hc: &http.Client{Jar: jar, Timeout: 2 * time.Minute}}
	b.get(t, "api/status?token="+url.QueryEscape(a.token)).want(t, http.StatusOK)
	return b
}

func (b *cookieClient) get(t testing.TB, route string) apiResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.base+route, nil)
	if err != nil {
		t.Fatal(err)
	}
	return doRequest(t, b.hc, req)
}
