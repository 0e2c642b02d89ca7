package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// notebookIn opens a new notebook in dir, logged in with the token, and waits until its
// kernel is idle; it returns the notebook's id.
func notebookIn(t *testing.T, ctx context.Context, srv *instance, dir string) string {
	t.Helper()
	var loc string
	run(t, ctx, "log in", time.Minute, chromedp.Navigate(srv.url+"?token="+srv.token), ready("dashboard"))
	run(t, ctx, "open a new notebook", 2*time.Minute,
		chromedp.Navigate(srv.url+"new?dir="+dir),
		ready("notebook"),
		until(`document.body.dataset.kernelStatus === "idle"`),
		into(chromedp.Location(), &loc),
	)
	id := loc[strings.LastIndex(loc, "/")+1:]
	if len(id) != 36 {
		t.Fatalf("the new notebook's page is %s", loc)
	}
	return id
}

// newNotebook is the start of a notebook test: the instance, the test's directory, a fresh
// browser on a new notebook there with its kernel idle, and the notebook's id.
func newNotebook(t *testing.T) (*instance, string, context.Context, string) {
	t.Helper()
	srv := nbkube(t)
	dir := srv.dir(t)
	ctx := browser(t)
	return srv, dir, ctx, notebookIn(t, ctx, srv, dir)
}

// cellSel is the selector of the i-th cell's part (e.g. ".cm-content", ".nb-outputs").
func cellSel(i int, part string) string {
	return fmt.Sprintf(`[data-cell-index="%d"] %s`, i, part)
}

// typeCell puts code into the i-th cell (which must exist) by typing it into its editor.
// Lines of code are typed with Enter between them; keep them unindented, as the editor
// indents for itself.
func typeCell(i int, code string) Act {
	return chromedp.Steps(
		chromedp.Click(chromedp.CSS(cellSel(i, ".cm-content"))),
		chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.KeyEvent(kb.Delete),
		chromedp.KeyEvent(code),
	)
}

// runCell types code into the i-th cell and runs it with Shift-Enter.
func runCell(i int, code string) Act {
	return chromedp.Steps(typeCell(i, code), chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierShift)))
}

// outputHas waits until the i-th cell's outputs show text.
func outputHas(i int, text string) Act {
	return until(fmt.Sprintf(`(() => { const o = document.querySelector(%q); return !!o && o.innerText.includes(%q); })()`,
		cellSel(i, ".nb-outputs"), text))
}

// press clicks the button whose accessible name is name (its aria-label, else its text).
func press(name string) Act {
	return until(fmt.Sprintf(`(() => {
		const b = [...document.querySelectorAll('button')].find(b => !b.disabled &&
			((b.getAttribute('aria-label') || b.textContent).trim() === %q));
		if (b) { b.click(); return true; }
		return false;
	})()`, name))
}

// confirm accepts the open dialog, if any, with the button named name.
func confirm(name string) Act {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const d = document.querySelector('dialog[open]');
		if (!d) return;
		const b = [...d.querySelectorAll('button')].find(b => (b.getAttribute('aria-label') || b.textContent).trim() === %q);
		if (b) b.click();
	})()`, name))
}

// onDisk reads the notebook file.
func onDisk(t *testing.T, p string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var nb map[string]any
	if err := json.Unmarshal(data, &nb); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return nb
}

// A person writes and runs code, sees rich output, answers input(), interrupts, saves, and
// finds it all again after a reload; the copy and the print view show the same.
func TestNotebook_RunRichOutputInputInterruptSaveReloadCopyPrint(t *testing.T) {
	srv, dir, ctx, id := newNotebook(t)

	run(t, ctx, "print(6*7)", time.Minute, runCell(0, "print(6*7)"), outputHas(0, "42"))
	run(t, ctx, "a matplotlib plot", 2*time.Minute,
		runCell(1, "import matplotlib.pyplot as plt; plt.plot([1, 3, 2]); plt.show()"),
		until(fmt.Sprintf(`(() => { const i = document.querySelector(%q); return !!i && i.src.startsWith('data:image/png') && i.naturalWidth > 100; })()`,
			cellSel(1, ".nb-outputs img"))),
	)
	run(t, ctx, "1/0", time.Minute, runCell(2, "1/0"), outputHas(2, "ZeroDivisionError"))
	run(t, ctx, "input()", time.Minute,
		runCell(3, "name = input('Who? '); print('hello', name)"),
		chromedp.WaitVisible(chromedp.CSS(cellSel(3, "input"))),
		chromedp.SendKeys(chromedp.CSS(cellSel(3, "input")), "ann"+kb.Enter),
		outputHas(3, "hello ann"),
	)
	run(t, ctx, "interrupt time.sleep(30)", time.Minute,
		runCell(4, "import time; time.sleep(30)"),
		until(`document.body.dataset.kernelStatus === "busy"`),
		press("Interrupt"),
		outputHas(4, "KeyboardInterrupt"),
		until(`document.body.dataset.kernelStatus === "idle"`),
	)
	run(t, ctx, "a password", time.Minute,
		runCell(5, "import getpass; secret = getpass.getpass('Secret? '); print(len(secret))"),
		chromedp.WaitVisible(chromedp.CSS(cellSel(5, "input[type=password]"))),
		chromedp.SendKeys(chromedp.CSS(cellSel(5, "input[type=password]")), "hunter2"+kb.Enter),
		outputHas(5, "7"),
	)
	if shown := eval[string](t, ctx, `document.body.innerText`); strings.Contains(shown, "hunter2") {
		t.Error("the password is shown on the page")
	}
	run(t, ctx, "scroll to the top", 10*time.Second, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	screenshot(t, ctx, "notebook")

	// Ctrl-S writes nbformat 4 with the outputs.
	file := filepath.Join(srv.root, dir, "Untitled.ipynb")
	run(t, ctx, "Ctrl-S", time.Minute,
		chromedp.KeyEvent(kb.Escape),
		chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		until(`document.body.dataset.dirty === "false"`),
	)
	nb := onDisk(t, file)
	cells, _ := nb["cells"].([]any)
	if nb["nbformat"] != float64(4) || len(cells) < 5 {
		t.Fatalf("saved notebook: nbformat %v, %d cells", nb["nbformat"], len(cells))
	}
	first := cells[0].(map[string]any)
	outs, _ := first["outputs"].([]any)
	if src := fmt.Sprint(first["source"]); !strings.Contains(src, "print(6*7)") || len(outs) != 1 ||
		!strings.Contains(fmt.Sprint(outs[0].(map[string]any)["text"]), "42") || first["execution_count"] == nil {
		t.Errorf("saved first cell: %v", first)
	}
	plot := cells[1].(map[string]any)["outputs"].([]any)
	if len(plot) == 0 || !strings.Contains(fmt.Sprint(plot), "image/png") {
		t.Errorf("saved plot cell outputs: %.200v", plot)
	}

	// A reload shows what was saved.
	run(t, ctx, "reload", time.Minute,
		chromedp.Reload(),
		ready("notebook"),
		outputHas(0, "42"),
		outputHas(2, "ZeroDivisionError"),
		chromedp.WaitVisible(chromedp.CSS(cellSel(1, ".nb-outputs img"))),
	)

	// The print view: code and outputs, no editor.
	run(t, ctx, "print view", time.Minute,
		chromedp.Navigate(srv.url+id+"/print"),
		ready("print"),
	)
	shown := eval[string](t, ctx, `document.body.innerText`)
	if !strings.Contains(shown, "print(6*7)") || !strings.Contains(shown, "42") || !strings.Contains(shown, "ZeroDivisionError") ||
		eval[int](t, ctx, `document.querySelectorAll('img').length`) < 1 || eval[int](t, ctx, `document.querySelectorAll('.cm-editor').length`) != 0 {
		t.Errorf("the print view shows:\n%s", shown)
	}
	run(t, ctx, "print view of an unknown id", time.Minute,
		chromedp.Navigate(srv.url+"0e0e0e0e-0e0e-4e0e-8e0e-0e0e0e0e0e0e/print"),
		chromedp.WaitVisible(chromedp.CSS(`[role=alert]`)),
	)
	if shown := eval[string](t, ctx, `document.body.innerText`); !strings.Contains(shown, "No notebook with id") {
		t.Errorf("unknown id's print view: %s", shown)
	}

	// A copy opens on its own page with the same cells.
	var loc string
	run(t, ctx, "copy", 2*time.Minute,
		chromedp.Navigate(srv.url+id+"/copy"),
		ready("notebook"),
		outputHas(0, "42"),
		into(chromedp.Location(), &loc),
	)
	if strings.Contains(loc, id) {
		t.Errorf("the copy opened at %s, the original's page", loc)
	}
	if _, err := os.Stat(filepath.Join(srv.root, dir, "Untitled-Copy1.ipynb")); err != nil {
		t.Errorf("no copy on disk: %v", err)
	}
}

// Restart clears the kernel's state; HTML output cannot run script in the page (a handler is
// dropped, a <script> runs in a frame of its own: outputs_test.go).
func TestNotebook_RestartClearsStateAndOutputScriptsDoNotRun(t *testing.T) {
	_, _, ctx, _ := newNotebook(t)

	run(t, ctx, "HTML with a script", time.Minute,
		runCell(0, `from IPython.display import HTML, display; display(HTML('<b id="shown">bold</b><img src="x" onerror="window.pwned = 2">')); HTML('<script>window.pwned = 1</script>')`),
		chromedp.WaitVisible(chromedp.CSS(cellSel(0, "#shown"))),
		until(fmt.Sprintf(`!!document.querySelector(%q)`, cellSel(0, "iframe.nb-frame[data-sized]"))),
		chromedp.Sleep(500*time.Millisecond),
	)
	if pwned := eval[any](t, ctx, `window.pwned === undefined ? null : window.pwned`); pwned != nil {
		t.Errorf("an output's script ran in the page: window.pwned = %v", pwned)
	}

	run(t, ctx, "restart", 2*time.Minute,
		runCell(1, "a = 5; print(a + 1)"),
		outputHas(1, "6"),
		press("Restart"),
		chromedp.Sleep(300*time.Millisecond),
		confirm("Restart"),
		until(`document.body.dataset.kernelStatus === "idle"`),
		runCell(2, "print(a)"),
		outputHas(2, "NameError"),
	)
}

// A WebSocket dropped in the middle of an execution comes back by itself, and the output
// printed meanwhile appears.
func TestNotebook_ReconnectsAndShowsMissedOutput(t *testing.T) {
	srv, _, ctx, _ := newNotebook(t)

	run(t, ctx, "start printing", time.Minute,
		runCell(0, "import time"),
		until(`document.body.dataset.kernelStatus === "idle"`),
		runCell(1, "for i in range(8): print('tick', i, flush=True) or time.sleep(0.5)"),
		outputHas(1, "tick 1"),
	)
	if n := srv.proxy.cut(); n == 0 {
		t.Fatal("no connection to cut")
	}
	run(t, ctx, "missed output after the reconnect", time.Minute,
		outputHas(1, "tick 7"),
		until(`document.body.dataset.kernelStatus === "idle"`),
	)
	shown := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%q).innerText`, cellSel(1, ".nb-outputs")))
	for i := range 8 {
		if strings.Count(shown, fmt.Sprintf("tick %d\n", i)) != 1 && !strings.HasSuffix(shown, fmt.Sprintf("tick %d", i)) {
			t.Errorf("tick %d is not shown once in:\n%s", i, shown)
		}
	}
}
