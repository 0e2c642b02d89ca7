package browser

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/nbkube/nbkube/internal/testenv"
)

// saveKeys presses Ctrl-S.
func saveKeys() Act {
	return chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl))
}

// fileHas waits until the file at p holds want.
func fileHas(t *testing.T, p, want string) {
	t.Helper()
	testenv.Eventually(t, "the file on disk", 30*time.Second, func() error {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if string(data) != want {
			return fmt.Errorf("%s holds %q, want %q", p, data, want)
		}
		return nil
	})
}

// A person makes a text file from the dashboard's New menu and types into it at once; Ctrl-S
// saves it. A .py file is highlighted as Python. A save over a file changed meanwhile asks,
// and Overwrite writes the page's text.
func TestEditor_NewFileTypeSaveHighlightAndConflict(t *testing.T) {
	srv := nbkube(t)
	dir := srv.dir(t)
	ctx := browser(t)
	run(t, ctx, "log in", time.Minute, chromedp.Navigate(srv.url+"?token="+srv.token), ready("dashboard"))

	var loc string
	run(t, ctx, "new text file, typed into at once, saved", time.Minute,
		chromedp.Navigate(srv.url+"tree/"+dir),
		ready("dashboard"),
		press("New file"),
		press("Text file"),
		ready("editor"),
		chromedp.KeyEvent("hello editor"),
		until(`document.body.dataset.dirty === "true" && document.title.startsWith("●")`),
		saveKeys(),
		until(`document.body.dataset.dirty === "false"`),
		into(chromedp.Location(), &loc),
	)
	if !strings.HasSuffix(loc, "/edit/"+dir+"/untitled.txt") {
		t.Errorf("the new file's editor is at %s", loc)
	}
	fileHas(t, filepath.Join(srv.root, dir, "untitled.txt"), "hello editor")
	if n := eval[string](t, ctx, `document.querySelector('.cm-content').getAttribute('aria-label')`); n != "Text of untitled.txt" {
		t.Errorf("the editor's accessible name is %q", n)
	}
	screenshot(t, ctx, "editor-text")

	// A Python file: highlighted as Python, with line numbers.
	py := filepath.Join(srv.root, dir, "x.py")
	if err := os.WriteFile(py, []byte("def f():\n    return 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "a Python file", time.Minute,
		chromedp.Navigate(srv.url+"edit/"+dir+"/x.py"),
		ready("editor"),
		until(`[...document.querySelectorAll('.cm-content .tok-keyword')].some(e => e.textContent === 'def')`),
		until(`document.querySelectorAll('.cm-lineNumbers .cm-gutterElement').length >= 3`),
	)
	screenshot(t, ctx, "editor-python")

	// Someone changes the file through the API; the page's save asks, Overwrite writes.
	run(t, ctx, "type", 30*time.Second, chromedp.KeyEvent(kb.End), chromedp.KeyEvent("  # mine"),
		until(`document.body.dataset.dirty === "true"`))
	time.Sleep(1100 * time.Millisecond) // a modification time the page cannot have seen
	body, _ := json.Marshal(map[string]string{"type": "file", "format": "text", "content": "theirs\n"})
	req, err := http.NewRequest(http.MethodPut, srv.url+"api/contents/"+dir+"/x.py", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+srv.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("their save: %v %v", resp, err)
	}
	resp.Body.Close()
	run(t, ctx, "a save over their change asks", time.Minute,
		saveKeys(),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open]`)),
		until(`document.querySelector('dialog[open]').innerText.includes('changed on the server')`),
	)
	if data, _ := os.ReadFile(py); string(data) != "theirs\n" {
		t.Fatalf("the save overwrote the file changed elsewhere: %q", data)
	}
	run(t, ctx, "overwrite", time.Minute, confirm("Overwrite"), until(`document.body.dataset.dirty === "false"`))
	fileHas(t, py, "def f():  # mine\n    return 1\n")
}

// The viewer shows an image in an <img>, and an HTML file in a sandboxed frame whose scripts
// reach neither the page, nor its cookies, nor the API.
func TestEditor_ViewerShowsImagesAndSandboxesHTML(t *testing.T) {
	srv := nbkube(t)
	dir := srv.dir(t)
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for x := range 40 {
		img.Set(x, x%30, color.RGBA{200, 30, 30, 255})
	}
	var pic bytes.Buffer
	if err := png.Encode(&pic, img); err != nil {
		t.Fatal(err)
	}
	page := `<!doctype html><title>probe</title><script>
function probe(f) { try { return 'read: ' + String(f()); } catch (e) { return 'blocked: ' + e.name; } }
const r = { parent: probe(() => parent.document.title), cookie: probe(() => document.cookie), origin: String(self.origin) };
fetch('/api/contents', { credentials: 'include' }).then((x) => x.text()).then((t) => { r.api = 'read: ' + t.slice(0, 40); },
  (e) => { r.api = 'blocked: ' + e.name; }).finally(() => setInterval(() => parent.postMessage(JSON.stringify(r), '*'), 100));
</script>`
	for name, data := range map[string][]byte{"pic.png": pic.Bytes(), "page.html": []byte(page)} {
		if err := os.WriteFile(filepath.Join(srv.root, dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := browser(t)
	run(t, ctx, "log in", time.Minute, chromedp.Navigate(srv.url+"?token="+srv.token), ready("dashboard"))
	run(t, ctx, "an image", time.Minute,
		chromedp.Navigate(srv.url+"view/"+dir+"/pic.png"),
		ready("viewer"),
		until(`(() => { const i = document.querySelector('main img'); return !!i && i.complete && i.naturalWidth === 40; })()`),
	)
	// The dashboard leads there too.
	run(t, ctx, "the dashboard's link", time.Minute,
		chromedp.Navigate(srv.url+"tree/"+dir), ready("dashboard"),
		until(fmt.Sprintf(`document.querySelector('[data-path=%q] a.nb-name').getAttribute('href') === %q`, dir+"/pic.png", "/view/"+dir+"/pic.png")),
		until(fmt.Sprintf(`document.querySelector('[data-path=%q] a.nb-name').getAttribute('href') === %q`, dir+"/page.html", "/view/"+dir+"/page.html")),
	)

	var probe string
	run(t, ctx, "an HTML page", time.Minute,
		chromedp.Navigate(srv.url+"view/"+dir+"/page.html"),
		ready("viewer"),
		chromedp.Evaluate[chromedp.Void](`window.addEventListener('message', (e) => { window.probed = e.data; })`),
		until(`typeof window.probed === 'string'`),
		into(chromedp.Evaluate[string](`window.probed`), &probe),
	)
	var r map[string]string
	if err := json.Unmarshal([]byte(probe), &r); err != nil {
		t.Fatalf("the probe's report %q: %v", probe, err)
	}
	for _, k := range []string{"parent", "cookie", "api"} {
		if !strings.HasPrefix(r[k], "blocked") {
			t.Errorf("the page's script reached %s: %s", k, r[k])
		}
	}
	if r["origin"] != "null" {
		t.Errorf("the page's script runs in origin %q, want an opaque one", r["origin"])
	}
	if sb := eval[string](t, ctx, `document.querySelector('main iframe').getAttribute('sandbox')`); sb != "allow-scripts" {
		t.Errorf("the frame's sandbox is %q, want allow-scripts alone", sb)
	}
	screenshot(t, ctx, "viewer-html")
}
