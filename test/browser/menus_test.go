package browser

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// savedSources are the cells' sources of the notebook as the contents API has it.
func savedSources(t *testing.T, srv *instance, path string) []string {
	t.Helper()
	var m struct {
		Content struct {
			Cells []struct {
				Source any `json:"source"`
			} `json:"cells"`
		} `json:"content"`
	}
	apiGet(t, srv, "api/contents/"+(&url.URL{Path: path}).EscapedPath(), &m)
	var out []string
	for _, c := range m.Content.Cells {
		out = append(out, sourceText(c.Source))
	}
	return out
}

// sourceText is a cell's source, which nbformat writes as a string or a list of lines.
func sourceText(v any) string {
	if lines, ok := v.([]any); ok {
		return fmt.Sprint(lines...) // strings side by side are joined without spaces
	}
	return fmt.Sprint(v)
}

// key presses a key with modifiers.
func key(k string, mods ...chromedp.Modifier) Act {
	return chromedp.KeyEvent(k, chromedp.KeyModifiers(mods...))
}

// clickSel clicks the element the selector finds, by the page's own click (menus open on
// mousedown, as a mouse does it: the event is sent in full).
func clickSel(sel string) Act {
	return until(fmt.Sprintf(`(() => {
		const e = document.querySelector(%q);
		if (!e) return false;
		const r = e.getBoundingClientRect();
		const o = {bubbles: true, cancelable: true, clientX: r.x + 5, clientY: r.y + 5, view: window};
		e.dispatchEvent(new MouseEvent('mousedown', o));
		e.dispatchEvent(new MouseEvent('mouseup', o));
		e.dispatchEvent(new MouseEvent('click', o));
		return true;
	})()`, sel))
}

// clearField empties a text field. A key that opened a dialog can be typed into the field the
// dialog focuses: chromedp sends a key's character as an event of its own, which the page's
// preventDefault of the keydown does not stop (a person's key is stopped whole).
func clearField(sel string) Act {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).value = ""`, sel))
}

// focused is true when the focused element matches the selector.
func focused(sel string) Act {
	return until(fmt.Sprintf(`!!document.activeElement && document.activeElement.matches(%q)`, sel))
}

// cellText is the text the i-th cell's input shows, with its lines.
func cellText(i int) string {
	return fmt.Sprintf(`document.querySelector(%q).innerText.trim()`, cellSel(i, ".nb-input"))
}

// The menus, the palette and the keys of issue 42 item 5: File and Cell menus by mouse and by
// keyboard, the palette, Shift-Down and Shift-M, split at the cursor, clear all outputs,
// change kernel, and H.
func TestMenus_MenusPaletteSelectionMergeSplitClearKernelHelp(t *testing.T) {
	srv, dir, ctx, _ := newNotebook(t)
	file := dir + "/Untitled.ipynb"

	run(t, ctx, "two cells run", time.Minute,
		runCell(0, "print('A')"), outputHas(0, "A"),
		runCell(1, "print('B')"), outputHas(1, "B"),
		until(cells+` === 3`),
	)
	run(t, ctx, "Shift-Down selects two cells, Shift-M merges them", time.Minute,
		key(kb.Escape), key(kb.ArrowUp), key(kb.ArrowUp),
		until(`document.querySelector('.nb-selected').dataset.cellIndex === "0"`),
		key(kb.ArrowDown, chromedp.ModifierShift),
		until(`document.querySelectorAll('.nb-marked').length === 2`),
		key("M", chromedp.ModifierShift),
		until(cells+` === 2`),
		until(cellText(0)+` === "print('A')\nprint('B')"`),
		until(`document.querySelectorAll('.nb-marked').length === 0`),
		key("s", chromedp.ModifierCtrl),
		until(`document.body.dataset.dirty === "false"`),
	)
	if got := savedSources(t, srv, file); len(got) != 2 || got[0] != "print('A')\nprint('B')" {
		t.Fatalf("saved after the merge: %q", got)
	}

	run(t, ctx, "Ctrl-Shift-Minus splits at the cursor", time.Minute,
		chromedp.Click(chromedp.CSS(cellSel(0, ".nb-input"))),
		focused(`[data-cell-index="0"] .cm-content`),
		key(kb.Home, chromedp.ModifierCtrl), key(kb.ArrowDown), key(kb.Home),
		key("-", chromedp.ModifierCtrl, chromedp.ModifierShift),
		until(cells+` === 3`),
		until(cellText(0)+` === "print('A')"`),
		until(cellText(1)+` === "print('B')"`),
		focused(`[data-cell-index="1"] .cm-content`),
	)

	run(t, ctx, "the Cell menu by mouse: run all", time.Minute,
		clickSel(`[role=menubar] [data-menu="Cell"]`),
		chromedp.WaitVisible(chromedp.CSS(`[role=menu][aria-label="Cell"]`)),
		clickSel(`[role=menu] [data-command="run-all"]`),
		outputHas(0, "A"), outputHas(1, "B"),
		until(`!document.querySelector('[role=menu]')`),
	)
	run(t, ctx, "the menus by keyboard: arrows, Escape gives the focus back, End and Enter clear all outputs", time.Minute,
		key(kb.Escape),
		focused(`.nb-cell`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[role=menubar] [data-menu="File"]').focus()`),
		key(kb.ArrowRight), key(kb.ArrowRight), key(kb.ArrowRight), key(kb.ArrowRight),
		focused(`[data-menu="Cell"]`),
		key(kb.ArrowDown),
		focused(`[role=menu][aria-label="Cell"] [data-command="run"]`),
		until(`document.querySelector('[data-menu="Cell"]').getAttribute('aria-expanded') === "true"`),
		until(`document.querySelector('[data-command="run"] kbd').textContent === "Ctrl-Enter"`),
		key(kb.Escape),
		focused(`[data-menu="Cell"]`),
		until(`!document.querySelector('[role=menu]')`),
		key(kb.Escape),
		focused(`.nb-cell`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[role=menubar] [data-menu="Cell"]').focus()`),
		key(kb.ArrowDown), key(kb.End), key(kb.ArrowUp),
		focused(`[data-command="clear-all-output"]`),
		key(kb.Enter),
		until(`[...document.querySelectorAll('.nb-outputs')].every(o => o.innerText.trim() === "")`),
		focused(`.nb-cell`),
	)
	run(t, ctx, "the File menu by mouse: save", time.Minute,
		clickSel(`[role=menubar] [data-menu="File"]`),
		until(`document.querySelector('[role=menu] [data-command="save"] kbd').textContent === "Ctrl-S"`),
	)
	screenshot(t, ctx, "notebook-menu")
	run(t, ctx, "save from the File menu", time.Minute,
		clickSel(`[role=menu] [data-command="save"]`),
		until(`document.body.dataset.dirty === "false"`),
	)
	nb := onDisk(t, filepath.Join(srv.root, file))
	for i, c := range nb["cells"].([]any) {
		if outs, _ := c.(map[string]any)["outputs"].([]any); len(outs) != 0 {
			t.Errorf("cell %d still has outputs after Clear all outputs: %v", i, outs)
		}
	}

	run(t, ctx, "the palette runs a command", time.Minute,
		key(kb.Escape),
		key("P", chromedp.ModifierCtrl, chromedp.ModifierShift),
		chromedp.WaitVisible(chromedp.CSS(`dialog.nb-palette [role=combobox]`)),
		focused(`dialog.nb-palette [role=combobox]`),
		clearField(`dialog.nb-palette [role=combobox]`),
		chromedp.SendKeys(chromedp.CSS(`dialog.nb-palette [role=combobox]`), "type raw"),
		until(`document.querySelectorAll('dialog.nb-palette [role=option]').length === 1`),
		key(kb.Enter),
		until(`!document.querySelector('dialog[open]')`),
		until(`document.querySelector('.nb-selected').dataset.cellType === "raw"`),
	)

	run(t, ctx, "change the kernel from the Kernel menu", 2*time.Minute,
		clickSel(`[role=menubar] [data-menu="Kernel"]`),
		clickSel(`[role=menu] [data-command="change-kernel"]`),
		until(`[...document.querySelectorAll('dialog[open] label')].some(l => l.textContent.includes("Python 3 (second)"))`),
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll('dialog[open] label')].find(l => l.textContent.includes("Python 3 (second)")).querySelector('input').click()`),
		confirm("Change"),
		until(`document.querySelector('.nb-kernel-name').textContent === "Python 3 (second)"`),
		until(`document.body.dataset.kernelStatus === "idle"`),
		// A new kernel: its first execution.
		runCell(2, "print('new', 6*7)"),
		outputHas(2, "new 42"),
		until(`document.querySelector('[data-cell-index="2"] .nb-prompt').textContent === "[1]:"`),
	)
	var sessions []struct {
		Path   string `json:"path"`
		Kernel struct {
			Name string `json:"name"`
		} `json:"kernel"`
	}
	apiGet(t, srv, "api/sessions", &sessions)
	found := false
	for _, s := range sessions {
		if s.Path == file {
			found = true
			if s.Kernel.Name != "python3-second" {
				t.Errorf("the session's kernel is %q, not python3-second", s.Kernel.Name)
			}
		}
	}
	if !found {
		t.Errorf("no session for %s in %+v", file, sessions)
	}

	run(t, ctx, "H shows the shortcuts", time.Minute,
		key(kb.Escape),
		key("h"),
		chromedp.WaitVisible(chromedp.CSS(`dialog.nb-help`)),
		until(`(() => { const t = document.querySelector('dialog.nb-help').innerText;
			return t.includes("Merge cells") && t.includes("Shift-M") && t.includes("Ctrl-Shift-P") && t.includes("D, D"); })()`),
	)
	screenshot(t, ctx, "notebook-shortcuts")
	run(t, ctx, "Escape closes the help", time.Minute,
		key(kb.Escape),
		until(`!document.querySelector('dialog[open]')`),
		key("s", chromedp.ModifierCtrl),
		until(`document.body.dataset.dirty === "false"`),
	)
	meta := onDisk(t, filepath.Join(srv.root, file))["metadata"].(map[string]any)
	if ks, _ := meta["kernelspec"].(map[string]any); ks["name"] != "python3-second" {
		t.Errorf("the notebook's kernelspec is %v", ks)
	}
}

// dialogButton clicks the button of the open dialog whose text is name.
func dialogButton(name string) Act {
	return until(fmt.Sprintf(`(() => {
		const b = [...document.querySelectorAll('dialog[open] button')].find(b => b.textContent.trim() === %q);
		if (b) { b.click(); return true; }
		return false;
	})()`, name))
}

// F finds and replaces in every cell's source; a cell's tags and metadata are edited in a
// dialog and saved with the notebook.
func TestMenus_FindReplaceAndCellMetadata(t *testing.T) {
	srv, dir, ctx, _ := newNotebook(t)
	file := filepath.Join(srv.root, dir, "Untitled.ipynb")

	run(t, ctx, "two cells", time.Minute,
		typeCell(0, "x = 1"), key(kb.Escape), key("b"),
		until(cells+` === 2`),
		typeCell(1, "y = x + X"), key(kb.Escape),
	)
	run(t, ctx, "F: find next, then replace all", time.Minute,
		key("f"),
		focused(`dialog.nb-find input[aria-label="Find"]`),
		clearField(`dialog.nb-find input[aria-label="Find"]`),
		chromedp.SendKeys(chromedp.CSS(`dialog.nb-find input[aria-label="Find"]`), "x"+kb.Enter),
		until(`document.querySelector('dialog.nb-find [role=status]').textContent.startsWith("Cell 2: 3 matches")`),
		chromedp.Click(chromedp.CSS(`dialog.nb-find input[type=checkbox]`)),
		chromedp.SendKeys(chromedp.CSS(`dialog.nb-find input[aria-label="Replace with"]`), "value"),
		dialogButton("Replace all"),
		until(`document.querySelector('dialog.nb-find [role=status]').textContent === "Replaced 2 matches."`),
		key(kb.Escape),
		until(`!document.querySelector('dialog[open]')`),
		until(cellText(0)+` === "value = 1"`),
		until(cellText(1)+` === "y = value + X"`),
	)
	run(t, ctx, "tags and metadata from the Cell menu", time.Minute,
		clickSel(`[role=menubar] [data-menu="Cell"]`),
		clickSel(`[role=menu] [data-command="edit-metadata"]`),
		focused(`dialog[open] textarea[aria-label^="Tags"]`),
		chromedp.SendKeys(chromedp.CSS(`dialog[open] textarea[aria-label^="Tags"]`), "keep, slow"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('dialog[open] textarea[aria-label^="Metadata"]').value = '{"collapsed": true}'`),
		dialogButton("Set"),
		// Gone from the page once its answer is taken (closed, it may still be there).
		until(`!document.querySelector('dialog')`),
		key("s", chromedp.ModifierCtrl),
		until(`document.body.dataset.dirty === "false"`),
	)
	var tagged []any
	var sources []string
	for _, c := range onDisk(t, file)["cells"].([]any) {
		cell := c.(map[string]any)
		sources = append(sources, sourceText(cell["source"]))
		if m, _ := cell["metadata"].(map[string]any); m["tags"] != nil {
			tagged = append(tagged, m)
		}
	}
	if fmt.Sprint(tagged) != "[map[collapsed:true tags:[keep slow]]]" {
		t.Errorf("the cells' metadata with tags: %v", tagged)
	}
	if strings.Join(sources, "|") != "value = 1|y = value + X" {
		t.Errorf("saved sources: %q", sources)
	}
}
