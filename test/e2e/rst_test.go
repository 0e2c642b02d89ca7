package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/testenv"
)

// rstSample has what /rstservice/render must render: sections, lists, emphasis, literal
// blocks, links, tables, admonitions and code.
const rstSample = `Notes
=====

Part one
--------

Some *emphasis*, **strong** text and a link to ` + "`Jupyter <https://jupyter.org>`_" + `.

- an item
- another

::

    a literal block

.. code:: python

    print("hi")

====  =====
key   value
====  =====
a     1
====  =====

.. note:: Be careful.
`

// postRST posts src to /rstservice/render.
func postRST(t testing.TB, api *jupyterAPI, src string) apiResponse {
	t.Helper()
	req := api.request(t, http.MethodPost, "rstservice/render", nil)
	req.Body = io.NopCloser(strings.NewReader(src))
	req.ContentLength = int64(len(src))
	req.Header.Set("Content-Type", "text/x-rst")
	return api.do(t, req)
}

// testRSTService, a case of TestKernels_ThroughLocal, renders reStructuredText through the
// older interface's /rstservice/render, with docutils in the renderer pod that the manager
// keeps and the local node runs.
func testRSTService(t *testing.T, inst *instance, api *jupyterAPI) {
	var html string
	testenv.Eventually(t, "the renderer to render", 3*time.Minute, func() error {
		r := postRST(t, api, rstSample)
		if r.status != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", r.status, r.body)
		}
		html = string(r.body)
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("Content-Type %q", ct)
		}
		return nil
	})
	for _, want := range []string{`<h1 class="title">Notes</h1>`, `Part one</h2>`, `<em>emphasis</em>`, `<strong>strong</strong>`,
		`href="https://jupyter.org"`, `<li>an item</li>`, `a literal block`, `<pre class="code python literal-block">`,
		`<td>1</td>`, `<div class="admonition note">`} {
		if !strings.Contains(html, want) {
			t.Errorf("the HTML lacks %q:\n%s", want, html)
		}
	}

	// Files are not inserted: not the contents the API server serves, nor the renderer's own.
	secret := filepath.Join(inst.root, "secret.txt")
	if err := os.WriteFile(secret, []byte("NOT-FOR-THE-PAGE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{".. include:: " + secret + "\n", ".. raw:: html\n   :file: " + secret + "\n", ".. raw:: html\n\n   <script>x()</script>\n"} {
		r := postRST(t, api, "Text.\n\n"+src)
		if strings.Contains(string(r.body), "NOT-FOR-THE-PAGE") || strings.Contains(string(r.body), "<script") {
			t.Errorf("%q let through (%d): %s", src, r.status, r.body)
		}
	}

	// Invalid reST is Jupyter's 400 error, saying why.
	r := postRST(t, api, "Text with :nosuchrole:`x`.\n").want(t, http.StatusBadRequest)
	if e := r.jupyterError(t); !strings.HasPrefix(e.Message, "Invalid RST: ") || !strings.Contains(e.Message, "nosuchrole") {
		t.Errorf("invalid reST: %+v", e)
	}

	// Without a ready renderer the answer says so, and it renders again once one is back.
	inst.kubectl(t, "scale", "deployment", "nbkube-rst-renderer", "--replicas=0")
	t.Cleanup(func() { inst.kubectl(t, "scale", "deployment", "nbkube-rst-renderer", "--replicas=1") })
	testenv.Eventually(t, "503 without a renderer", 2*time.Minute, func() error {
		r := postRST(t, api, "*x*")
		if r.status != http.StatusServiceUnavailable {
			return fmt.Errorf("HTTP %d: %s", r.status, r.body)
		}
		// A render the going renderer took before it stopped is a 503 too, for a timeout
		// (seen on a loaded machine): the wait is for the answer without a renderer.
		if e := r.jupyterError(t); !strings.Contains(e.Message, "no reStructuredText renderer is ready") {
			return fmt.Errorf("503: %+v", e)
		}
		return nil
	})
	inst.kubectl(t, "scale", "deployment", "nbkube-rst-renderer", "--replicas=1")
	testenv.Eventually(t, "the renderer back", 3*time.Minute, func() error {
		if r := postRST(t, api, "*x*"); r.status != http.StatusOK {
			return fmt.Errorf("HTTP %d: %s", r.status, r.body)
		}
		return nil
	})
}
