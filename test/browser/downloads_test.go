package browser

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"k8s.io/utils/ptr"
)

// downloads makes the browser keep what it downloads in a directory of the test and returns
// a function that waits for the next download and gives its suggested name and content.
func downloads(t *testing.T, ctx context.Context) func(what string, start Act) (string, string) {
	t.Helper()
	dir := t.TempDir()
	begun := make(chan *cdpbrowser.EventDownloadWillBegin, 4)
	done := make(chan *cdpbrowser.EventDownloadProgress, 4)
	if err := chromedp.ListenBrowser(ctx, func(ev any) {
		switch e := ev.(type) {
		case *cdpbrowser.EventDownloadWillBegin:
			begun <- e
		case *cdpbrowser.EventDownloadProgress:
			if e.State == cdpbrowser.DownloadProgressStateCompleted || e.State == cdpbrowser.DownloadProgressStateCanceled {
				done <- e
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
		Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	return func(what string, start Act) (string, string) {
		t.Helper()
		run(t, ctx, what, time.Minute, start)
		var b *cdpbrowser.EventDownloadWillBegin
		select {
		case b = <-begun:
		case <-time.After(time.Minute):
			t.Fatalf("%s: no download began", what)
		}
		select {
		case e := <-done:
			if e.State != cdpbrowser.DownloadProgressStateCompleted {
				t.Fatalf("%s: the download of %s was %s", what, b.SuggestedFilename, e.State)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: the download of %s did not complete", what, b.SuggestedFilename)
		}
		data, err := os.ReadFile(filepath.Join(dir, b.GUID))
		if err != nil {
			t.Fatal(err)
		}
		return b.SuggestedFilename, string(data)
	}
}

// downloadAs picks format in the notebook's Download as select.
func downloadAs(format string) Act {
	return until(`(() => { const s = document.querySelector('select[aria-label="Download as"]');
		if (!s) return false; s.value = ` + "`" + format + "`" + `; s.dispatchEvent(new Event('change')); return true; })()`)
}

// A notebook downloads in each of Jupyter's formats from its page, unsaved work saved first;
// any file downloads from the dashboard.
func TestDownloads_NotebookInEachFormatAndFilesFromTheDashboard(t *testing.T) {
	srv, dir, ctx, _ := newNotebook(t)
	next := downloads(t, ctx)
	run(t, ctx, "run a cell", time.Minute, runCell(0, `print("from the notebook")`), outputHas(0, "from the notebook"))
	for _, tc := range []struct{ format, name, has string }{
		{"script", "Untitled.py", `print("from the notebook")`},
		{"html", "Untitled.html", "<html>"},
		{"markdown", "Untitled.md", "```python"},
		{"notebook", "Untitled.ipynb", `"nbformat": 4`},
		{"latex", "Untitled.tex", `\documentclass`},
		{"rst", "Untitled.rst", ".. code:: ipython3"},
		{"asciidoc", "Untitled.asciidoc", "[source, ipython3]"},
	} {
		name, content := next("download as "+tc.format, downloadAs(tc.format))
		if name != tc.name || !strings.Contains(content, tc.has) || !strings.Contains(content, "from the notebook") {
			t.Errorf("download as %s: %s with %.300q, want %s with %q", tc.format, name, content, tc.name, tc.has)
		}
	}
	if err := os.WriteFile(filepath.Join(srv.root, dir, "data.csv"), []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open the dashboard", time.Minute, chromedp.Navigate(srv.url+"tree/"+dir), ready("dashboard"),
		until(`!!document.querySelector('a.nb-download[aria-label="Download data.csv"]')`))
	name, content := next("download a file from the dashboard", chromedp.Click(`a.nb-download[aria-label="Download data.csv"]`))
	if name != "data.csv" || content != "a,b\n1,2\n" {
		t.Errorf("the dashboard's download: %s with %q", name, content)
	}
}
