package browser

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	if open := eval[bool](t, ctx, `!!document.querySelector('dialog[open]')`); open {
		t.Error("the save asked about a conflict that only the server's outputs made")
	}
	cells = storedCells(t, file)
	if len(cells) != 2 || !strings.Contains(cells[0].Outputs, "recorded while away") || cells[1].Source != "x = 2" {
		t.Errorf("the file after the save: %+v, want the recorded run and the page's new cell", cells)
	}
}
