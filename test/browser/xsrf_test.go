package browser

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// forgetXSRF deletes the browser's _xsrf cookie, as a browser restart does (it is a session
// cookie; the login cookie lasts 30 days). Its path is the base URL, "/" here.
func forgetXSRF() Act {
	return chromedp.Evaluate[chromedp.Void](`document.cookie = '_xsrf=; Max-Age=0; Path=/'`)
}

const hasXSRF = `document.cookie.split(';').some(c => c.trim().startsWith('_xsrf='))`

// After a browser restart the login is there and the _xsrf cookie is not. A save then goes
// through all the same: the page sends it once more with the cookie the refusal brought, and
// a page opened again gets the cookie with it. A save refused even so says so, and the
// notebook stays unsaved, its edits on the page.
func TestNotebook_SavesWithoutTheXSRFCookie(t *testing.T) {
	srv, dir, ctx, _ := newNotebook(t)
	file := filepath.Join(srv.root, dir, "Untitled.ipynb")
	saved := func(text string) bool {
		data, err := os.ReadFile(file)
		return err == nil && strings.Contains(string(data), text)
	}

	// The page cannot read the cookie (as if no server gave one): the save is refused twice,
	// the page says so and keeps the edit.
	var shown string
	run(t, ctx, "a save refused for XSRF", time.Minute,
		typeCell(0, "'first edit'"),
		chromedp.KeyEvent(kb.Escape),
		chromedp.Evaluate[chromedp.Void](`Object.defineProperty(document, 'cookie', { configurable: true, get: () => '', set: () => {} })`),
		chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open]`)),
		into(chromedp.Text(chromedp.CSS(`dialog[open]`)), &shown),
		confirm("OK"),
		until(`document.body.dataset.dirty === "true"`),
	)
	if !strings.Contains(shown, "Save failed") || saved("first edit") {
		t.Fatalf("a save refused twice shows %q; saved: %v", shown, saved("first edit"))
	}

	// The cookie gone, the page saves.
	run(t, ctx, "save without the _xsrf cookie", time.Minute,
		chromedp.Evaluate[chromedp.Void](`delete document.cookie`),
		forgetXSRF(),
		until(`!(`+hasXSRF+`)`),
		chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		until(`document.body.dataset.dirty === "false"`),
		until(hasXSRF),
	)
	if !saved("first edit") {
		t.Fatal("the save without the _xsrf cookie did not write the edit")
	}

	// The page opened again after the restart has the cookie, and saves.
	run(t, ctx, "reopen the page without the _xsrf cookie, edit and save", 2*time.Minute,
		forgetXSRF(),
		until(`!(`+hasXSRF+`)`),
		chromedp.Reload(),
		ready("notebook"),
		until(hasXSRF),
		typeCell(0, "'second edit'"),
		chromedp.KeyEvent(kb.Escape),
		chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		until(`document.body.dataset.dirty === "false"`),
	)
	if !saved("second edit") {
		t.Fatal("the save after reopening the page did not write the edit")
	}
}

// The printed URL's token does not stay in the address of the page it opens, nor of a user's
// file opened with it, where the page's scripts would read it.
func TestLogin_TheTokenLeavesTheAddress(t *testing.T) {
	srv := nbkube(t)
	dir := srv.dir(t)
	if err := os.WriteFile(filepath.Join(srv.root, dir, "page.html"), []byte(`<!DOCTYPE html><p id="p">ben's page</p>`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	var loc string
	run(t, ctx, "open the printed URL", time.Minute,
		chromedp.Navigate(srv.url+"?token="+srv.token),
		ready("dashboard"),
		into(chromedp.Location(), &loc),
	)
	if loc != srv.url {
		t.Errorf("the printed URL shows the dashboard at %s, want %s", loc, srv.url)
	}
	// A fresh browser opening a file with the token.
	ctx = browser(t)
	run(t, ctx, "open a file with the token", time.Minute,
		chromedp.Navigate(srv.url+"files/"+dir+"/page.html?token="+srv.token),
		chromedp.WaitVisible(chromedp.CSS(`#p`)),
		into(chromedp.Location(), &loc),
	)
	if strings.Contains(loc, "token") || !strings.HasSuffix(loc, "/files/"+dir+"/page.html") {
		t.Errorf("the file shows at %s", loc)
	}
}
