package browser

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// cells is the number of cells on the page.
const cells = `document.querySelectorAll('[data-cell-index]').length`

// Jupyter's keys, from the keyboard alone: command and edit mode, A/B/DD/M/Y, Ctrl-Enter and
// Alt-Enter; and what assistive technology needs: named buttons, labelled editors and output
// regions, the kernel status as a live region, landmarks.
func TestNotebook_KeyboardAndAccessibility(t *testing.T) {
	_, _, ctx, _ := newNotebook(t)

	key := func(k string, mods ...chromedp.Modifier) Act {
		return chromedp.KeyEvent(k, chromedp.KeyModifiers(mods...))
	}
	run(t, ctx, "command mode keys", time.Minute,
		typeCell(0, "1+1"),
		key(kb.Escape),
		key("b"),
		until(cells+` === 2`),
		key("m"),
		until(`document.querySelector('[data-cell-index="1"]').dataset.cellType === "markdown"`),
		key("y"),
		until(`document.querySelector('[data-cell-index="1"]').dataset.cellType === "code"`),
		key("a"),
		until(cells+` === 3`),
		key("d"), key("d"),
		until(cells+` === 2`),
	)
	run(t, ctx, "Ctrl-Enter runs in place, Alt-Enter runs and inserts below", time.Minute,
		typeCell(1, "6*7"),
		key(kb.Enter, chromedp.ModifierCtrl),
		outputHas(1, "42"),
		until(cells+` === 2`),
		typeCell(0, "2+3"),
		key(kb.Enter, chromedp.ModifierAlt),
		outputHas(0, "5"),
		until(cells+` === 3`),
	)

	// Names and roles, as the accessibility tree shows them.
	for _, name := range []string{"Save", "Run", "Interrupt", "Restart", "Restart and run all", "Shut down", "Insert cell below", "Cut", "Copy", "Paste", "Move up", "Move down", "Checkpoint", "Revert", "Rename"} {
		found := eval[bool](t, ctx, fmt.Sprintf(`[...document.querySelectorAll('button')].some(b => (b.getAttribute('aria-label') || b.textContent).trim() === %q)`, name))
		if !found {
			t.Errorf("no button named %q", name)
		}
	}
	checks := map[string]string{
		"each editor is a labelled textbox":  `[...document.querySelectorAll('.cm-content')].every(e => e.getAttribute('role') === 'textbox' && /Cell \d+/.test(e.getAttribute('aria-label') || ''))`,
		"outputs are labelled regions":       `[...document.querySelectorAll('.nb-outputs')].every(o => o.getAttribute('role') === 'region' && /Output of cell \d+/.test(o.getAttribute('aria-label') || ''))`,
		"the kernel status is a live region": `(() => { const s = document.querySelector('.nb-kernel-status'); return !!s && s.getAttribute('role') === 'status' && s.getAttribute('aria-live') === 'polite' && /idle/i.test(s.textContent); })()`,
		"a main landmark and a toolbar":      `!!document.querySelector('main') && !!document.querySelector('[role=toolbar]')`,
		"the cell type select is labelled":   `(() => { const s = document.querySelector('select'); return !!s && !!(s.getAttribute('aria-label') || (s.labels && s.labels.length)); })()`,
	}
	for what, expr := range checks {
		if !eval[bool](t, ctx, expr) {
			t.Errorf("%s: no", what)
		}
	}
}

// Outputs as Jupyter shows them: streams with \r and ANSI colours, display updates,
// clear_output(wait=True), markdown with math; completion (Tab) and inspection (Shift-Tab).
func TestNotebook_OutputsCompletionAndInspection(t *testing.T) {
	_, _, ctx, _ := newNotebook(t)

	run(t, ctx, "carriage return and colours", time.Minute,
		runCell(0, `print("abc\rX"); print("\x1b[31mred\x1b[0m plain")`),
		outputHas(0, "Xbc"),
		until(fmt.Sprintf(`(() => { const s = [...document.querySelectorAll(%q)].find(e => e.textContent === 'red'); return !!s && getComputedStyle(s).color === 'rgb(187, 0, 0)' || !!s && /red/.test(s.className); })()`, cellSel(0, ".nb-outputs span"))),
	)
	if shown := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%q).innerText`, cellSel(0, ".nb-outputs"))); strings.Contains(shown, "abc") {
		t.Errorf("\\r did not overwrite: %q", shown)
	}
	run(t, ctx, "update_display_data and clear_output(wait=True)", time.Minute,
		runCell(1, `from IPython.display import display, clear_output; h = display("first", display_id=True); h.update("second")`),
		outputHas(1, "second"),
		runCell(2, `print("gone"); clear_output(wait=True); print("kept")`),
		outputHas(2, "kept"),
	)
	for i, gone := range map[int]string{1: "first", 2: "gone"} {
		if shown := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%q).innerText`, cellSel(i, ".nb-outputs"))); strings.Contains(shown, gone) {
			t.Errorf("cell %d still shows %q: %q", i, gone, shown)
		}
	}
	run(t, ctx, "markdown with math", time.Minute,
		typeCell(3, "Euler: $e^{i\\pi} + 1 = 0$"),
		chromedp.KeyEvent(kb.Escape),
		chromedp.KeyEvent("m"),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierShift)),
		chromedp.WaitVisible(chromedp.CSS(`[data-cell-index="3"] .katex`)),
	)

	run(t, ctx, "completion", time.Minute,
		typeCell(4, "import os; os.pa"),
		chromedp.KeyEvent(kb.Tab),
		until(`[...document.querySelectorAll('.cm-tooltip-autocomplete li')].some(li => li.textContent.includes('path'))`),
		chromedp.KeyEvent(kb.Escape),
	)
	run(t, ctx, "inspection", time.Minute,
		typeCell(4, "len"),
		chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)),
		until(fmt.Sprintf(`(() => { const p = document.querySelector(%q); return !!p && !p.hidden && /Return the number of items/.test(p.textContent); })()`, cellSel(4, ".nb-inspect"))),
	)
}

// Saving never overwrites a file changed elsewhere unasked; checkpoints can be gone back to;
// a rename keeps the page.
func TestNotebook_ConflictCheckpointRevertRename(t *testing.T) {
	srv, dir, ctx, id := newNotebook(t)
	file := filepath.Join(srv.root, dir, "Untitled.ipynb")

	run(t, ctx, "save a first version and checkpoint it", time.Minute,
		runCell(0, "print('version one')"),
		outputHas(0, "version one"),
		chromedp.KeyEvent(kb.Escape),
		chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		until(`document.body.dataset.dirty === "false"`),
		press("Checkpoint"),
		chromedp.Sleep(500*time.Millisecond),
	)

	// Someone else changes the file: the next save asks, and Reload shows their version.
	other := `{"cells":[{"cell_type":"markdown","id":"x","metadata":{},"source":"written elsewhere"}],"metadata":{},"nbformat":4,"nbformat_minor":5}`
	time.Sleep(1100 * time.Millisecond) // a modification time the page cannot have seen
	if err := os.WriteFile(file, []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "a save over a changed file", time.Minute,
		typeCell(0, "print('version two')"),
		chromedp.KeyEvent(kb.Escape),
		chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open]`)),
	)
	if data, _ := os.ReadFile(file); string(data) != other {
		t.Fatalf("the save overwrote the file changed elsewhere:\n%s", data)
	}
	run(t, ctx, "reload their version", time.Minute,
		confirm("Reload"),
		until(`document.body.innerText.includes('written elsewhere')`),
	)

	// Revert to the checkpoint of version one.
	run(t, ctx, "revert to the checkpoint", time.Minute,
		press("Revert"),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open]`)),
		chromedp.Evaluate[chromedp.Void](`(() => { const r = document.querySelector('dialog[open] input[type=radio]'); if (r) r.click(); })()`),
		confirm("Revert"),
		outputHas(0, "version one"),
	)

	// Rename: the page stays, the file moves.
	run(t, ctx, "rename", time.Minute,
		press("Rename"),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] input[type=text]`)),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('dialog[open] input[type=text]').value = ''`),
		chromedp.SendKeys(chromedp.CSS(`dialog[open] input[type=text]`), "renamed.ipynb"),
		confirm("Rename"),
		until(`document.title.startsWith('renamed') && document.querySelector('.nb-title').textContent === 'renamed.ipynb'`),
	)
	var loc string
	run(t, ctx, "where the page is", 10*time.Second, into(chromedp.Location(), &loc))
	if !strings.HasSuffix(loc, id) {
		t.Errorf("after the rename the page is %s", loc)
	}
	if _, err := os.Stat(filepath.Join(srv.root, dir, "renamed.ipynb")); err != nil {
		t.Errorf("renamed file: %v", err)
	}
}

// A new notebook takes typing at once, as Notebook's does: its first cell is in edit mode, so
// that the first keys are code and not commands ("r" would make the cell raw and lose the text).
func TestNotebook_NewNotebookTakesTypingAtOnce(t *testing.T) {
	srv := nbkube(t)
	dir := srv.dir(t)
	ctx := browser(t)
	run(t, ctx, "log in", time.Minute, chromedp.Navigate(srv.url+"?token="+srv.token), ready("dashboard"))
	run(t, ctx, "type into a new notebook at once and run it", 2*time.Minute,
		chromedp.Navigate(srv.url+"new?dir="+dir),
		ready("notebook"),
		chromedp.KeyEvent("r = 6*7\nprint(r)"),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierShift)),
		outputHas(0, "42"),
	)
	if typ := eval[string](t, ctx, `document.querySelector('[data-cell-index="0"]').dataset.cellType`); typ != "code" {
		t.Errorf("the first cell is %s after typing, want code", typ)
	}
}

// The header (name, kernel status, save state) stays in view with the toolbar in a long
// notebook; a kernel shut down on purpose says "No kernel", not a dead kernel, and the next
// run starts one.
func TestNotebook_HeaderStaysInViewAndShutDownSaysNoKernel(t *testing.T) {
	_, _, ctx, _ := newNotebook(t)
	steps := []Act{typeCell(0, "1"), chromedp.KeyEvent(kb.Escape)}
	for range 40 {
		steps = append(steps, chromedp.KeyEvent("b"))
	}
	steps = append(steps, until(cells+` === 41`),
		chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, document.documentElement.scrollHeight)`),
		until(`window.scrollY > 500`))
	run(t, ctx, "a long notebook, scrolled to its end", time.Minute, steps...)
	if !eval[bool](t, ctx, `(() => { const r = document.querySelector('.nb-kernel-status').getBoundingClientRect();
		const h = document.querySelector('.nb-title').getBoundingClientRect();
		return r.top >= 0 && r.bottom <= innerHeight && h.top >= 0 && h.bottom <= innerHeight; })()`) {
		t.Error("the kernel status and the notebook's name scrolled out of view")
	}
	run(t, ctx, "shut the kernel down", time.Minute,
		press("Shut down"), confirm("Shut down"),
		until(`document.querySelector('.nb-kernel-status').textContent.trim() === "No kernel"`),
		until(`document.body.dataset.kernelStatus === "none"`))
	run(t, ctx, "the next run starts a kernel", 2*time.Minute,
		chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`),
		runCell(0, "print(20+22)"), outputHas(0, "42"),
		until(`document.body.dataset.kernelStatus === "idle"`))
}

// The dashboard opens a notebook in a tab of its own, whose header leads back to the folder;
// the pages have an icon.
func TestNotebook_OpensInATabOfItsOwnThatLeadsBackToItsFolder(t *testing.T) {
	srv, dir, ctx, _ := newNotebook(t)
	if href := eval[string](t, ctx, `document.querySelector('a.nb-folder').getAttribute('href')`); href != "/tree/"+dir {
		t.Errorf("the notebook's way back to its folder: %q, want /tree/%s", href, dir)
	}
	icon := eval[string](t, ctx, `document.querySelector('link[rel=icon]').href`)
	if resp, err := http.Get(icon); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("the page's icon %s: %v %v", icon, resp, err)
	} else {
		resp.Body.Close()
	}
	run(t, ctx, "the dashboard of the folder", time.Minute, chromedp.Navigate(srv.url+"tree/"+dir), ready("dashboard"),
		until(`!!document.querySelector('tr[data-path$="Untitled.ipynb"] a.nb-name')`))
	if target := eval[string](t, ctx, `document.querySelector('tr[data-path$="Untitled.ipynb"] a.nb-name').target`); target != "_blank" {
		t.Errorf("the notebook's link opens in %q, want a tab of its own", target)
	}
}
