package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestLocal_ExportsANotebookToHTMLAndScript: the "Download as" menu of a Jupyter front end
// gets the notebook converted, as from Jupyter Server.
func TestLocal_ExportsANotebookToHTMLAndScript(t *testing.T) {
	inst := startLocal(t, t.TempDir(), t.TempDir())
	api := inst.api(t)

	data, err := os.ReadFile("../../internal/nbconvert/testdata/errors.ipynb")
	if err != nil {
		t.Fatal(err)
	}
	api.call(t, http.MethodPut, "api/contents/report.ipynb",
		map[string]any{"type": "notebook", "content": json.RawMessage(data)}).want(t, http.StatusCreated)

	var exporters map[string]struct {
		OutputMimetype string `json:"output_mimetype"`
	}
	api.getJSON(t, "api/nbconvert", &exporters)
	if exporters["html"].OutputMimetype != "text/html" {
		t.Errorf("/api/nbconvert lists %v", exporters)
	}

	r := api.call(t, http.MethodGet, "nbconvert/html/report.ipynb?download=true", nil).want(t, http.StatusOK)
	if ct, cd := r.header.Get("Content-Type"), r.header.Get("Content-Disposition"); ct != "text/html; charset=utf-8" || cd != "attachment; filename*=utf-8''report.html" {
		t.Errorf("HTML export: Content-Type %q, Content-Disposition %q", ct, cd)
	}
	for _, want := range []string{"<title>report</title>", "highlight hl-ipython3", "ZeroDivisionError", "jp-OutputArea-output"} {
		if !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("HTML export lacks %q", want)
		}
	}

	r = api.call(t, http.MethodGet, "nbconvert/script/report.ipynb", nil).want(t, http.StatusOK)
	script := string(r.body)
	if !strings.HasPrefix(script, "#!/usr/bin/env python") || !strings.Contains(script, "# In[") || !strings.Contains(script, "return 1 / x") || strings.Contains(script, "jp-OutputArea") {
		t.Errorf("script export:\n%s", script)
	}
}
