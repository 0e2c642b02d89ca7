package apiserver_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/nbkube/nbkube/agent"
	"github.com/nbkube/nbkube/apiserver"
	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/testenv"
)

// rstAt renders on the renderer at e, as the repository does on a renderer pod.
type rstAt struct {
	agents *agentclient.Client
	e      agentclient.Endpoint
}

func (r rstAt) RenderRST(ctx context.Context, src []byte) ([]byte, error) {
	return r.agents.RenderRST(ctx, r.e, src)
}

// startRenderer runs a real renderer (the agent's render-rst mode with Debian's docutils)
// whose token is token, and returns where it listens.
func startRenderer(t *testing.T, token string) agentclient.Endpoint {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, agentapi.SecretKeyToken), []byte(token), 0o400); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().(*net.TCPAddr)
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.RunRSTRenderer(ctx, agent.RSTConfig{Listen: addr.String(), SecretDir: dir, Python: []string{"/usr/bin/python3"}, Log: testr.New(t)})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	testenv.Eventually(t, "the renderer to listen", 30*time.Second, func() error {
		c, err := net.Dial("tcp", addr.String())
		if err == nil {
			c.Close()
		}
		return err
	})
	return agentclient.Endpoint{Host: "127.0.0.1", Port: addr.Port, Token: token}
}

func TestRSTService_RendersThroughARealRenderer(t *testing.T) {
	e := startRenderer(t, "renderer-token")
	s := newServer(t, func(o *apiserver.Options) { o.RST = rstAt{agents: agentclient.New(), e: e} })

	r := s.do("POST", "/rstservice/render", "Title\n=====\n\nSome *text* with a `link <https://example.org>`_.\n\n.. note:: Careful.\n")
	expect(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.HasSuffix(csp, "; sandbox") {
		t.Errorf("the rendered document is not sandboxed: CSP %q", csp)
	}
	for _, want := range []string{`<h1 class="title">Title</h1>`, `<em>text</em>`, `href="https://example.org"`, `<div class="admonition note">`} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("the HTML lacks %q:\n%s", want, r.body)
		}
	}

	// Invalid reST: Jupyter's 400, with docutils' reason.
	r = s.do("POST", "/rstservice/render", "Text with :nosuchrole:`x`.\n")
	expect(t, r, http.StatusBadRequest)
	if m := r.json(t); m["message"] != `Invalid RST: line 1: Unknown interpreted text role "nosuchrole".` || m["reason"] != nil {
		t.Errorf("invalid reST: %s", r.body)
	}

	// Bounded before it reaches the renderer.
	r = s.do("POST", "/rstservice/render", strings.Repeat("x", agentapi.MaxRSTBytes+1))
	expect(t, r, http.StatusRequestEntityTooLarge)

	// Only with the API token.
	if r := s.do("POST", "/rstservice/render", "*x*", "Authorization", ""); r.status != http.StatusForbidden {
		t.Errorf("without the token: %d %s", r.status, r.body)
	}
}

func TestRSTService_WithoutARendererIsUnavailable(t *testing.T) {
	s := newServer(t)
	r := s.do("POST", "/rstservice/render", "*x*")
	expect(t, r, http.StatusServiceUnavailable)
	if m := r.json(t)["message"]; !strings.HasPrefix(m.(string), "no reStructuredText renderer is ready") {
		t.Errorf("message %q", m)
	}

	// A renderer that refuses the API server's token is the server's fault, not the user's.
	e := startRenderer(t, "renderer-token")
	e.Token = "wrong"
	s = newServer(t, func(o *apiserver.Options) { o.RST = rstAt{agents: agentclient.New(), e: e} })
	expect(t, s.do("POST", "/rstservice/render", "*x*"), http.StatusBadGateway)
}
