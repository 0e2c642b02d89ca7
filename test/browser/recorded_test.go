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

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/nbkube/nbkube/internal/jpclient"
	"github.com/nbkube/nbkube/internal/testenv"
)

// storedCells are the cells of a notebook file, their sources and outputs' text joined.
func storedCells(t *testing.T, file string) []struct{ ID, Source, Outputs string } {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var nb struct {
		Cells []struct {
			ID      string            `json:"id"`
			Source  []string          `json:"source"`
			Outputs []json.RawMessage `json:"outputs"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(data, &nb); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	var out []struct{ ID, Source, Outputs string }
	for _, c := range nb.Cells {
		var outputs strings.Builder
		for _, o := range c.Outputs {
			outputs.Write(o)
		}
		out = append(out, struct{ ID, Source, Outputs string }{c.ID, strings.Join(c.Source, ""), outputs.String()})
	}
	return out
}

// A run whose page was away (its connection dropped, here another client of the page's kernel
// that leaves at once) is written into the notebook by the kernel's agent. The page that is
// still open did not see it: its next save, which the changed file refuses, takes that run
// into the cell and saves over the file without asking, keeping both the run and the page's
// own edit.
func TestNotebook_ASaveTakesTheOutputsTheServerWroteMeanwhile(t *testing.T) {
	srv, dir, ctx, _ := newNotebook(t)
	file := filepath.Join(srv.root, dir, "Untitled.ipynb")
	code := "print('recorded while away')"
	run(t, ctx, "type a cell and save", time.Minute,
		typeCell(0, code),
		chromedp.KeyEvent(kb.Escape),
		chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		until(`document.body.dataset.dirty === "false"`),
	)
	cells := storedCells(t, file)
	if len(cells) != 1 || cells[0].Source != code {
		t.Fatalf("saved cells %+v", cells)
	}

	var sessions []struct {
		Path   string `json:"path"`
		Kernel struct {
			ID string `json:"id"`
		} `json:"kernel"`
	}
	apiGet(t, srv, "api/sessions", &sessions)
	kernel := ""
	for _, s := range sessions {
		if s.Path == dir+"/Untitled.ipynb" {
			kernel = s.Kernel.ID
		}
	}
	if kernel == "" {
		t.Fatalf("no session of the notebook in %+v", sessions)
	}
	away, err := jpclient.DialKernel(srv.url, kernel, jpclient.Options{Token: srv.token, SessionID: jpclient.NewID(), Username: "away"})
	if err != nil {
		t.Fatal(err)
	}
	if err := away.KernelInfo(time.Now().Add(time.Minute), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := away.SendCell(cells[0].ID, code); err != nil {
		t.Fatal(err)
	}
	away.Close()
	testenv.Eventually(t, "the run in the notebook file", time.Minute, func() error {
		if c := storedCells(t, file); !strings.Contains(c[0].Outputs, "recorded while away") {
			return fmt.Errorf("cells %+v", c)
		}
		return nil
	})

	run(t, ctx, "edit another cell and save", time.Minute,
		chromedp.KeyEvent("b"),
		typeCell(1, "x = 2"),
		chromedp.KeyEvent(kb.Escape),
		chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		until(`document.body.dataset.dirty === "false"`),
		outputHas(0, "recorded while away"),
	)
	savedWithoutAsking(t, ctx, file, "recorded while away")
}

// savedWithoutAsking checks a save made after the server wrote a run: no conflict dialog,
// and the file has the run (its output has ran) in cell 0 and the page's "x = 2" in cell 1.
func savedWithoutAsking(t *testing.T, ctx context.Context, file, ran string) {
	t.Helper()
	if open := eval[bool](t, ctx, `!!document.querySelector('dialog[open]')`); open {
		t.Error("the save asked about a conflict that only the server's run made")
	}
	cells := storedCells(t, file)
	if len(cells) != 2 || !strings.Contains(cells[0].Outputs, ran) || cells[1].Source != "x = 2" {
		t.Errorf("the file after the save: %+v, want the run and the page's edit", cells)
	}
}

// A tab closed while its cell runs, and the notebook opened again: the page shows what the
// server wrote meanwhile, the cell still running, and the run's further lines as they come;
// once the run ends the cell has its count and the file every line.
func TestNotebook_ClosedMidRunAndOpenedAgainFollowsTheRun(t *testing.T) {
	srv, dir, ctx, _ := newNotebook(t)
	file := filepath.Join(srv.root, dir, "Untitled.ipynb")
	var loc string
	// Leaving a page whose notebook has unsaved changes asks first: yes.
	opening := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range opening {
			if err != nil {
				return
			}
			go func() {
				_ = chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
					_, err := cdp.Call(ctx, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
					return err
				}))
			}()
		}
	}()
	code := "for i in range(40): print(f'line {i}', flush=True); __import__('time').sleep(0.4)"
	run(t, ctx, "run a long cell, and save", 2*time.Minute,
		into(chromedp.Location(), &loc),
		runCell(0, code),
		outputHas(0, "line 1"),
		chromedp.KeyEvent(kb.Escape),
		chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
	)
	// The agent writes a run into a cell whose stored source is the run's: the saved one.
	testenv.Eventually(t, "the cell saved", 20*time.Second, func() error {
		// Shift-Enter made a second cell.
		if cells := storedCells(t, file); len(cells) == 0 || cells[0].Source != code {
			return fmt.Errorf("stored %q", fmt.Sprint(cells))
		}
		return nil
	})
	run(t, ctx, "leave", time.Minute, chromedp.Navigate("about:blank"))
	time.Sleep(1500 * time.Millisecond)
	prompt := `document.querySelector('[data-cell-index="0"] .nb-prompt').textContent`
	// Not ready("notebook"): the page is ready once the kernel is idle, at the run's end.
	run(t, ctx, "open it again", time.Minute,
		chromedp.Navigate(loc),
		// Written by the kernel's agent while no page had the run.
		outputHas(0, "line 3"),
		until(prompt+`.includes("*")`),
	)
	screenshot(t, ctx, "notebook-reopened-mid-run")
	// Still running until its last line: the page once showed the cell done (its count) while
	// the kernel ran it on, after a save took the server's copy.
	type shownNow struct {
		Prompt string `json:"prompt"`
		Out    string `json:"out"`
	}
	var mid shownNow
	run(t, ctx, "midway", time.Minute, outputHas(0, "line 25"), into(chromedp.Evaluate[shownNow](fmt.Sprintf(
		`({prompt: %s, out: document.querySelector(%q).innerText})`, prompt, cellSel(0, ".nb-outputs"))), &mid))
	if !strings.Contains(mid.Out, "line 39") && !strings.Contains(mid.Prompt, "*") {
		t.Errorf("prompt %q while the run goes on (output up to %q)", mid.Prompt, mid.Out[max(0, len(mid.Out)-20):])
	}
	run(t, ctx, "the run's further lines, then its end", time.Minute,
		outputHas(0, "line 39"),
		until(`!`+prompt+`.includes("*") && /\d/.test(`+prompt+`)`),
	)
	var shown string
	run(t, ctx, "read the output", 10*time.Second, into(chromedp.Evaluate[string](
		fmt.Sprintf(`document.querySelector(%q).innerText`, cellSel(0, ".nb-outputs"))), &shown))
	for i := 0; i < 40; i++ {
		if n := strings.Count(shown, fmt.Sprintf("line %d\n", i)); n > 1 {
			t.Errorf("line %d shown %d times:\n%s", i, n, shown)
		}
	}
	testenv.Eventually(t, "every line in the file", 10*time.Second, func() error {
		cells := storedCells(t, file)
		for i := 0; i < 40; i++ {
			if len(cells) == 0 || !strings.Contains(cells[0].Outputs, fmt.Sprintf("line %d\\n", i)) {
				return fmt.Errorf("stored %+v", cells)
			}
		}
		return nil
	})
	// The page loaded the cell marked running; the agent took the mark away with the run's
	// last write. That, like the outputs, is the run's: a save asks nothing.
	run(t, ctx, "edit the other cell and save", time.Minute,
		typeCell(1, "x = 2"),
		chromedp.KeyEvent(kb.Escape),
		chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		until(`document.body.dataset.dirty === "false"`),
	)
	savedWithoutAsking(t, ctx, file, "line 39")
}

// Run all in the background (server-side execution): the page saves, the server runs the
// stored cells, the page shows them running while it stays; closed, the runs go on and land
// in the file, and the page opened again shows them.
func TestNotebook_RunAllInTheBackgroundGoesOnWithThePageClosed(t *testing.T) {
	srv, dir, ctx, _ := newNotebook(t)
	file := filepath.Join(srv.root, dir, "Untitled.ipynb")
	var loc string
	first := "for i in range(8): print(f'step {i}', flush=True); __import__('time').sleep(0.5)"
	prompt := func(i int) string {
		return fmt.Sprintf(`document.querySelector(%q).textContent`, cellSel(i, ".nb-prompt"))
	}
	run(t, ctx, "two cells, run in the background from the Cell menu", 2*time.Minute,
		into(chromedp.Location(), &loc),
		typeCell(0, first),
		key(kb.Escape),
		key("b"),
		typeCell(1, "print('second', 6*7)"),
		key(kb.Escape),
		clickSel(`[role=menubar] [data-menu="Cell"]`),
		clickSel(`[role=menu] [data-command="run-all-background"]`),
		outputHas(0, "step 1"),
		until(prompt(1)+`.includes("*")`),
	)
	if dirty := eval[string](t, ctx, `document.body.dataset.dirty`); dirty != "false" {
		t.Errorf("the notebook is unsaved (%s) after a run in the background, which saves first", dirty)
	}
	run(t, ctx, "close the page", time.Minute, chromedp.Navigate("about:blank"))
	testenv.Eventually(t, "both cells' runs in the file", time.Minute, func() error {
		cells := storedCells(t, file)
		if len(cells) != 2 || !strings.Contains(cells[0].Outputs, "step 7") || !strings.Contains(cells[1].Outputs, "second 42") {
			return fmt.Errorf("stored %+v", cells)
		}
		return nil
	})
	run(t, ctx, "open it again", time.Minute,
		chromedp.Navigate(loc),
		ready("notebook"),
		outputHas(0, "step 7"),
		outputHas(1, "second 42"),
	)
	if p0, p1 := eval[string](t, ctx, prompt(0)), eval[string](t, ctx, prompt(1)); !strings.Contains(p0, "1") || !strings.Contains(p1, "2") {
		t.Errorf("prompts %q and %q, want the counts 1 and 2 of the runs", p0, p1)
	}
}
