package agent

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/testenv"
)

// startRenderer runs a reST renderer with Debian's python3 (which has python3-docutils) and
// testToken, and returns its address once it listens; the test's cleanup stops it.
func startRenderer(t *testing.T, mutate func(*RSTConfig)) string {
	t.Helper()
	secret := t.TempDir()
	if err := os.WriteFile(filepath.Join(secret, agentapi.SecretKeyToken), []byte(testToken+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := RSTConfig{Listen: addr, SecretDir: secret, Python: []string{"/usr/bin/python3"}, Log: testr.New(t)}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunRSTRenderer(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the renderer ended with %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("the renderer did not stop")
		}
	})
	testenv.Eventually(t, "the renderer to listen", 30*time.Second, func() error {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err
	})
	return addr
}

// renderRST posts src to the renderer with token and returns the status and body.
func renderRST(t *testing.T, addr, token, src string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+agentapi.PathRenderRST, strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", agentapi.AuthScheme+" "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// errorMessage is the message of the renderer's ErrorBody.
func errorMessage(t *testing.T, body string) string {
	t.Helper()
	var e agentapi.ErrorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Message
}

const sampleRST = `Guide
=====

Setup
-----

Some *emphasis*, **strong** and ` + "``inline literal``" + ` text, a link to
` + "`Jupyter <https://jupyter.org>`_" + `.

- first item
- second item

1. one
2. two

::

    literal block

.. code:: python

    print("hi")

=====  =====
name   value
=====  =====
a      1
=====  =====

.. note:: Mind the gap.

.. warning:: Sharp edges.
`

func TestRSTRenderer_RendersReStructuredTextWithDocutils(t *testing.T) {
	addr := startRenderer(t, nil)
	status, html := renderRST(t, addr, testToken, sampleRST)
	if status != http.StatusOK {
		t.Fatalf("render: %d %s", status, html)
	}
	for _, want := range []string{
		`<title>Guide</title>`,
		`<h1 class="title">Guide</h1>`,
		`<h2 class="subtitle" id="setup">Setup</h2>`,
		`<em>emphasis</em>`,
		`<strong>strong</strong>`,
		`inline literal</`,
		`<a class="reference external" href="https://jupyter.org">Jupyter</a>`,
		`<li>first item</li>`,
		`<ol class="arabic simple">`,
		`<pre class="literal-block">`,
		`literal block`,
		`<pre class="code python literal-block">`,
		`<th class="head">name</th>`,
		`<td>1</td>`,
		`<div class="admonition note">`,
		`Mind the gap.`,
		`<div class="admonition warning">`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the HTML lacks %q:\n%s", want, html)
		}
	}
}

func TestRSTRenderer_NeitherInsertsFilesNorPassesRawHTML(t *testing.T) {
	addr := startRenderer(t, nil)
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP-SECRET-LINE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"include":         "Before.\n\n.. include:: " + secret + "\n\nAfter.\n",
		"literal include": "Before.\n\n.. include:: " + secret + "\n   :literal:\n\nAfter.\n",
		"raw":             "Before.\n\n.. raw:: html\n\n   <script>RAW-SCRIPT()</script>\n\nAfter.\n",
		"raw file":        "Before.\n\n.. raw:: html\n   :file: " + secret + "\n\nAfter.\n",
		"raw role":        ".. role:: raw-html(raw)\n   :format: html\n\nBefore :raw-html:`<script>RAW-SCRIPT()</script>` after.\n",
		"csv file":        "Before.\n\n.. csv-table:: T\n   :file: " + secret + "\n\nAfter.\n",
	} {
		t.Run(name, func(t *testing.T) {
			status, html := renderRST(t, addr, testToken, src)
			if strings.Contains(html, "TOP-SECRET-LINE") || strings.Contains(html, "<script") {
				t.Fatalf("the renderer let it through (%d):\n%s", status, html)
			}
			// Refused without a word in the document (warnings are not reported); the raw
			// role, never defined, leaves its text escaped.
			if status != http.StatusOK && status != http.StatusBadRequest {
				t.Errorf("status %d: %s", status, html)
			}
		})
	}
}

func TestRSTRenderer_InvalidReSTIsABadRequestThatSaysWhy(t *testing.T) {
	addr := startRenderer(t, nil)
	for src, want := range map[string]string{
		"Text with :nosuchrole:`x`.\n":   `Invalid RST: line 1: Unknown interpreted text role "nosuchrole".`,
		".. nosuchdirective:: x\n":       `Invalid RST: line 1: Unknown directive type "nosuchdirective".`,
		"A\n=\n\nB\n-\n\nC\n=\n\nD\n~\n": "Invalid RST: line",
		"caf\xe9\n":                      "Invalid RST: the reST is not UTF-8",
	} {
		status, body := renderRST(t, addr, testToken, src)
		if status != http.StatusBadRequest {
			t.Errorf("%q: %d %s, want 400", src, status, body)
			continue
		}
		if msg := errorMessage(t, body); !strings.HasPrefix(msg, want) {
			t.Errorf("%q: message %q, want it to start with %q", src, msg, want)
		}
	}
}

func TestRSTRenderer_RendersOnlyForTheToken(t *testing.T) {
	addr := startRenderer(t, nil)
	if status, body := renderRST(t, addr, "wrong", "*x*"); status != http.StatusForbidden {
		t.Errorf("with a wrong token: %d %s", status, body)
	}
	for _, path := range []string{agentapi.PathHealthz, agentapi.PathReadyz} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", path, resp.Status)
		}
	}
}

func TestRSTRenderer_BoundsTheInputAndTheTime(t *testing.T) {
	// Long enough for a small document on a loaded machine, far too short for the slow one
	// (about 18 s on an idle one).
	const timeout = 3 * time.Second
	addr := startRenderer(t, func(c *RSTConfig) { c.Timeout = timeout })
	status, body := renderRST(t, addr, testToken, strings.Repeat("x", agentapi.MaxRSTBytes+1))
	if status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit: %d %s", status, body)
	}
	// Tens of thousands of list items keep docutils busy for seconds.
	slow := strings.Repeat("- item *with* ``markup``\n", 40000)
	start := time.Now()
	status, body = renderRST(t, addr, testToken, slow)
	took := time.Since(start)
	if status != http.StatusServiceUnavailable || !strings.Contains(errorMessage(t, body), "did not finish within 3s") {
		t.Errorf("a rendering past the timeout: %d %s", status, body)
	}
	if took > timeout+2*time.Second {
		t.Errorf("the answer came %s after the request, the timeout is %s", took, timeout)
	}
	// The renderer still renders.
	if status, body := renderRST(t, addr, testToken, "*fine*"); status != http.StatusOK || !strings.Contains(body, "<em>fine</em>") {
		t.Errorf("after a timeout: %d %s", status, body)
	}
}

func TestRSTRenderer_WithoutDocutilsDoesNotStartAndSaysWhy(t *testing.T) {
	secret := t.TempDir()
	if err := os.WriteFile(filepath.Join(secret, agentapi.SecretKeyToken), []byte(testToken), 0o400); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "termination-log")
	err := RunRSTRenderer(t.Context(), RSTConfig{Listen: "127.0.0.1:0", SecretDir: secret, Python: []string{"/bin/false", "no-such-python"},
		TerminationLog: log, Log: testr.New(t)})
	if err == nil || !strings.Contains(err.Error(), "no Python interpreter with docutils") {
		t.Fatalf("RunRSTRenderer: %v", err)
	}
	if got, _ := os.ReadFile(log); !strings.Contains(string(got), "docutils") {
		t.Errorf("termination log %q", got)
	}
}
