package main

// The web pages' budgets, measured in Chromium (Debian's chromium, driven by chromedp) against
// the nbkube under test: the dashboard of a directory of 1,000 notebooks, a notebook of 200
// cells with outputs, the text editor on a Python file of 3,000 lines, the JavaScript each
// page loads, and the frames of a page printing 10,000 lines. Times are the pages' own performance marks (web/src/shell/ready.ts), counted
// from the start of the navigation.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// pagesReport holds the pages' measurements.
type pagesReport struct {
	dashboardRendered, dashboardReady []time.Duration
	notebookRendered, notebookReady   []time.Duration
	editorReady                       []time.Duration
	scripts                           map[string]int // page → JavaScript bytes loaded (as sent: gzipped)
	frames                            frameReport
	load                              string // the machine's load average when measured
	err                               error
}

// frameReport is what the page's frames did while it printed 10,000 lines.
type frameReport struct {
	duration time.Duration // from Shift-Enter to the last line shown
	frames   int
	maxGap   time.Duration // the longest time between two frames
}

const pageRuns = 5

func measurePages(nb *server, root string) *pagesReport {
	r := &pagesReport{scripts: map[string]int{}}
	r.err = r.measure(nb, root)
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.load = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	if r.err != nil {
		fmt.Fprintln(os.Stderr, "bench: pages:", r.err)
	}
	return r
}

func (r *pagesReport) measure(nb *server, root string) error {
	if err := pagesFixture(root); err != nil {
		return err
	}
	chromium := "/usr/bin/chromium"
	if p := os.Getenv("NBKUBE_CHROMIUM"); p != "" {
		chromium = p
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil {
		return fmt.Errorf("start chromium: %w", err)
	}
	step := func(timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
		tctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return chromedp.Do(tctx, steps...)
	}
	mark := func(name string) (time.Duration, error) {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		ms, err := chromedp.Run(tctx, chromedp.Poll[float64](fmt.Sprintf(
			`(() => { const m = performance.getEntriesByName(%q); return m.length ? m[0].startTime : 0; })()`, name),
			chromedp.WithPollingInterval(20*time.Millisecond)))
		return time.Duration(ms * float64(time.Millisecond)), err
	}
	scripts := func() (int, error) {
		return chromedp.Run(ctx, chromedp.Evaluate[int](`performance.getEntriesByType('resource')
			.filter(e => e.name.endsWith('.js')).reduce((n, e) => n + (e.encodedBodySize || e.transferSize), 0)`))
	}
	if err := step(time.Minute, chromedp.Navigate(nb.base+"?token="+nb.token)); err != nil {
		return err
	}

	// loads navigates to url pageRuns+1 times, from a fresh navigation each time (the browser's
	// cache keeps the scripts, as it would for a user coming back), and gives the times of
	// the page's marks in each load but the first, which fills the cache and tells the
	// scripts' size.
	loads := func(kind, url string) (rendered, ready []time.Duration, err error) {
		for i := range pageRuns + 1 {
			if err := step(time.Minute, chromedp.Navigate(url)); err != nil {
				return nil, nil, err
			}
			rd, err := mark("nbkube-rendered-" + kind)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", kind, err)
			}
			ry, err := mark("nbkube-ready-" + kind)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", kind, err)
			}
			if i == 0 {
				if r.scripts[kind], err = scripts(); err != nil {
					return nil, nil, err
				}
				continue
			}
			rendered, ready = append(rendered, rd), append(ready, ry)
		}
		return rendered, ready, nil
	}
	var err error
	// The dashboard of 1,000 notebooks.
	if r.dashboardRendered, r.dashboardReady, err = loads("dashboard", nb.base+"tree/pages/thousand"); err != nil {
		return err
	}
	// The notebook of 200 cells: rendered (cells shown, editable), then ready (kernel idle).
	id, err := notebookID(nb, "pages/two-hundred.ipynb")
	if err != nil {
		return err
	}
	if r.notebookRendered, r.notebookReady, err = loads("notebook", nb.base+id); err != nil {
		return err
	}
	// The text editor on a Python file of 3,000 lines: ready when the text is in the editor.
	if _, r.editorReady, err = loads("editor", nb.base+"edit/pages/three-thousand.py"); err != nil {
		return err
	}

	// 10,000 printed lines: count the frames while they arrive.
	if err := step(2*time.Minute,
		chromedp.Navigate(nb.base+"new?dir=pages"),
		chromedp.Poll[chromedp.Void](`document.body.dataset.ready === "notebook" && document.body.dataset.kernelStatus === "idle"`),
		chromedp.Click(chromedp.CSS(`[data-cell-index="0"] .cm-content`)),
		chromedp.KeyEvent("for i in range(10000): print('line', i)"),
		chromedp.Evaluate[chromedp.Void](`(() => {
			const f = window.__frames = { n: 0, last: 0, maxGap: 0, start: performance.now() };
			const tick = (t) => { if (f.last) f.maxGap = Math.max(f.maxGap, t - f.last); f.last = t; f.n++; if (!f.done) requestAnimationFrame(tick); };
			requestAnimationFrame(tick);
		})()`),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierShift)),
		chromedp.Poll[chromedp.Void](`(() => { const o = document.querySelector('[data-cell-index="0"] .nb-outputs');
			if (o && o.textContent.includes('line 9999')) { window.__frames.done = true; window.__frames.end = performance.now(); return true; } return false; })()`,
			chromedp.WithPollingInterval(10*time.Millisecond)),
	); err != nil {
		return fmt.Errorf("10,000 lines: %w", err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`window.__frames`))
	if err != nil {
		return err
	}
	var f struct {
		N                  int
		MaxGap, Start, End float64
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return err
	}
	r.frames = frameReport{frames: f.N, maxGap: time.Duration(f.MaxGap * float64(time.Millisecond)),
		duration: time.Duration((f.End - f.Start) * float64(time.Millisecond))}
	fmt.Fprintf(os.Stderr, "pages: dashboard rendered %v ready %v, notebook rendered %v ready %v, editor ready %v, scripts %v, frames %+v\n",
		r.dashboardRendered, r.dashboardReady, r.notebookRendered, r.notebookReady, r.editorReady, r.scripts, r.frames)
	return nil
}

// notebookID asks the server for the id of the notebook at p (its page's address).
func notebookID(nb *server, p string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, nb.base+"tree/"+p, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "token "+nb.token)
	req.Header.Set("Accept", "text/html")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || loc == "" {
		return "", fmt.Errorf("GET /tree/%s: %s", p, resp.Status)
	}
	return loc[strings.LastIndex(loc, "/")+1:], nil
}

// pagesFixture writes a directory of 1,000 small notebooks and a notebook of 200 cells with
// outputs: streams, tables as HTML, and a plot-sized PNG every tenth cell.
func pagesFixture(root string) error {
	dir := filepath.Join(root, "pages", "thousand")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	small := notebook(2 << 10)
	for i := range 1000 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("notebook-%04d.ipynb", i)), small, 0o644); err != nil {
			return err
		}
	}
	png := base64.StdEncoding.EncodeToString(make([]byte, 30<<10)) // the size of a small plot
	var cells []map[string]any
	for i := range 200 {
		var outputs []any
		switch {
		case i%10 == 0:
			outputs = append(outputs, map[string]any{"output_type": "display_data", "metadata": map[string]any{},
				"data": map[string]any{"image/png": png, "text/plain": "<Figure size 640x480 with 1 Axes>"}})
		case i%3 == 0:
			outputs = append(outputs, map[string]any{"output_type": "execute_result", "execution_count": i + 1, "metadata": map[string]any{},
				"data": map[string]any{"text/html": "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>", "text/plain": "   a  b\n0  1  2"}})
		default:
			outputs = append(outputs, map[string]any{"output_type": "stream", "name": "stdout", "text": strings.Repeat(fmt.Sprintf("value %d\n", i), 5)})
		}
		cells = append(cells, map[string]any{"cell_type": "code", "id": fmt.Sprintf("c%d", i), "execution_count": i + 1, "metadata": map[string]any{},
			"source": fmt.Sprintf("import math\nx = [math.sqrt(v) for v in range(%d)]\nprint(x[-1])", i+1), "outputs": outputs})
	}
	data, err := json.Marshal(map[string]any{"cells": cells, "nbformat": 4, "nbformat_minor": 5,
		"metadata": map[string]any{"kernelspec": map[string]any{"name": "python3", "display_name": "Python 3", "language": "python"}}})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "pages", "two-hundred.ipynb"), data, 0o644); err != nil {
		return err
	}
	var py strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&py, "def f%d(x):\n    return [v * %d for v in range(x)]  # a comment\n\n", i, i)
	}
	return os.WriteFile(filepath.Join(root, "pages", "three-thousand.py"), []byte(py.String()), 0o644)
}

// writePages writes the pages' section of the report.
func writePages(b *strings.Builder, r *pagesReport) {
	fmt.Fprintf(b, "## Web pages\n\nChromium (Debian's) on the same machine, %d loads each after one that fills the browser's cache; "+
		"times from the start of the navigation to the page's own mark (web/src/shell/ready.ts): *interactive* when its content is shown and takes input, "+
		"*ready* when everything it loads has come (the dashboard's kernel specs, running sessions and clusters; the notebook's kernel connected and idle: the first load starts it, the measured loads find its session). "+
		"Budgets from the pages issue, held to the median; the slowest of the loads is shown beside it. "+
		"Load average of the machine just after: %s.\n\n", pageRuns, r.load)
	if r.err != nil {
		fmt.Fprintf(b, "Not measured: %v\n\n", r.err)
		return
	}
	b.WriteString("| measurement | p50 | max | budget | p50 within |\n|---|---|---|---|---|\n")
	row := func(name string, ds []time.Duration, budget time.Duration) {
		s := slices.Clone(ds)
		slices.Sort(s)
		p50, mx := s[len(s)/2], s[len(s)-1]
		if budget == 0 {
			fmt.Fprintf(b, "| %s | %.0f ms | %.0f ms | – | – |\n", name, ms(p50), ms(mx))
			return
		}
		fmt.Fprintf(b, "| %s | %.0f ms | %.0f ms | < %.0f ms | %v |\n", name, ms(p50), ms(mx), ms(budget), p50 < budget)
	}
	row("dashboard of 1,000 notebooks, interactive", r.dashboardRendered, 300*time.Millisecond)
	row("the same, ready", r.dashboardReady, 0)
	row("notebook of 200 cells with outputs, interactive", r.notebookRendered, time.Second)
	row("the same, ready (kernel connected and idle)", r.notebookReady, 0)
	row("text editor on a Python file of 3,000 lines, ready (text shown, editable)", r.editorReady, 300*time.Millisecond)
	b.WriteString("\n| page | JavaScript loaded (gzipped) | budget | within |\n|---|---|---|---|\n")
	for _, page := range []string{"dashboard", "notebook", "editor"} {
		fmt.Fprintf(b, "| %s | %d KiB | 600 KiB | %v |\n", page, r.scripts[page]/1024, r.scripts[page] <= 600<<10)
	}
	f := r.frames
	fmt.Fprintf(b, "\nA cell printing 10,000 lines: shown in %.0f ms, %d frames meanwhile (%.0f per second), the longest gap between frames %.0f ms "+
		"(budget: frames keep coming, no gap over 200 ms: %v).\n\n",
		ms(f.duration), f.frames, float64(f.frames)/f.duration.Seconds(), ms(f.maxGap), f.maxGap < 200*time.Millisecond && f.frames > 0)
}
