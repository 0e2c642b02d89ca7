package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/nbkube/nbkube/internal/jpclient"
	"github.com/nbkube/nbkube/internal/testenv"
)

// legacyKernel is what IPython's POST /kernels and restart answered.
type legacyKernel struct {
	WSURL    string `json:"ws_url"`
	KernelID string `json:"kernel_id"`
}

// testLegacyKernels, a case of TestKernels_ThroughLocal, drives a kernel through the older
// IPython interface: notebooks by id, /kernels, and the per-channel WebSockets.
func testLegacyKernels(t *testing.T, api *jupyterAPI) {
	var notebookID string
	api.call(t, http.MethodPost, "notebooks", nil).want(t, http.StatusCreated).decode(t, &notebookID)
	var ids []string
	api.call(t, http.MethodGet, "kernels", nil).want(t, http.StatusOK).decode(t, &ids)

	var started, again legacyKernel
	api.call(t, http.MethodPost, "kernels?notebook="+url.QueryEscape(notebookID), nil).want(t, http.StatusOK).decode(t, &started)
	if started.KernelID == "" || !strings.HasPrefix(started.WSURL, "ws://") {
		t.Fatalf("POST /kernels?notebook=: %+v", started)
	}
	kid := started.KernelID
	t.Cleanup(func() { api.deleteQuietly("api/kernels/" + kid) })
	api.call(t, http.MethodPost, "kernels?notebook="+url.QueryEscape(notebookID), nil).want(t, http.StatusOK).decode(t, &again)
	if again.KernelID != kid {
		t.Errorf("the notebook's kernel again: %s, want %s", again.KernelID, kid)
	}
	api.call(t, http.MethodGet, "kernels", nil).want(t, http.StatusOK).decode(t, &ids)
	if !slices.Contains(ids, kid) {
		t.Errorf("GET /kernels %v lacks %s", ids, kid)
	}
	if nb := api.legacyNotebook(t, notebookID); nb.KernelID == nil || *nb.KernelID != kid {
		t.Errorf("GET /notebooks: %+v, want kernel_id %s", nb, kid)
	}

	iopub := dialJupyterWS(t, api, "kernels/"+kid+"/iopub", "")
	shell := dialJupyterWS(t, api, "kernels/"+kid+"/shell", "")
	testenv.Eventually(t, "both channels connected", cellTimeout, func() error {
		var k map[string]any
		api.call(t, http.MethodGet, "kernels/"+kid, nil).want(t, http.StatusOK).decode(t, &k)
		if k["connections"] != float64(2) {
			return fmt.Errorf("connections %v", k["connections"])
		}
		return nil
	})
	// IPython's channel sockets sent document.cookie first.
	for _, ws := range []*jupyterWS{iopub, shell} {
		ws.sendRaw("username-127-0-0-1=e2e")
	}
	e := jpclient.NewExecution(shell.execute("print('legacy')"))
	iopub.await(e, cellTimeout, "the output on iopub", (*jpclient.Execution).WentIdle)
	shell.await(e, cellTimeout, "the reply on shell", (*jpclient.Execution).Replied)
	if e.ReplyType != "execute_reply" || e.Status() != "ok" || e.Stdout.String() != "legacy\n" {
		t.Errorf("execute over /shell and /iopub: %s", e)
	}
	for _, ws := range []*jupyterWS{iopub, shell} {
		for _, m := range ws.Seen() {
			if m.Channel != ws.only {
				t.Errorf("a %s message on the %s socket", m.Channel, ws.only)
			}
		}
	}

	api.call(t, http.MethodPost, "kernels/"+kid+"/interrupt", nil).want(t, http.StatusNoContent)

	// A GET that changes a kernel needs the token: a login cookie alone could come from
	// any page's <img src>.
	browser := api.loggedInBrowser(t)
	if r := browser.get(t, "kernels"); r.status != http.StatusOK {
		t.Fatalf("GET /kernels with the login cookie: %d %s", r.status, r.body)
	}
	browser.get(t, "kernels/"+kid+"/restart").want(t, http.StatusForbidden)
	var restarted legacyKernel
	api.call(t, http.MethodGet, "kernels/"+kid+"/restart", nil).want(t, http.StatusOK).decode(t, &restarted)
	if restarted.KernelID != kid || !strings.HasPrefix(restarted.WSURL, "ws://") {
		t.Errorf("GET /kernels/%s/restart with the token: %+v", kid, restarted)
	}

	api.call(t, http.MethodPost, "kernels/"+kid+"/kill", nil).want(t, http.StatusNoContent)
	api.call(t, http.MethodGet, "kernels/"+kid, nil).want(t, http.StatusNotFound)
	api.call(t, http.MethodGet, "kernels", nil).want(t, http.StatusOK).decode(t, &ids)
	if slices.Contains(ids, kid) {
		t.Errorf("GET /kernels after kill still lists %s", kid)
	}
	if nb := api.legacyNotebook(t, notebookID); nb.KernelID != nil {
		t.Errorf("GET /notebooks after kill: kernel_id %s, want null", *nb.KernelID)
	}
}
