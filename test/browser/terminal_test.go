package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/nbkube/nbkube/internal/testenv"
)

// termLines is a JavaScript expression: the terminal's rows as xterm.js's DOM renderer shows
// them, without trailing blanks.
const termLines = `[...document.querySelectorAll('.xterm-rows > div')].map(d => d.textContent.replace(/\u00a0/g, ' ').trimEnd())`

// termShows waits until a row of the terminal satisfies the JavaScript test on l.
func termShows(test string) Act {
	return until(termLines + `.some(l => ` + test + `)`)
}

// termLine waits until a row of the terminal is exactly line.
func termLine(line string) Act {
	return termShows(fmt.Sprintf(`l === %q`, line))
}

// termKeys types text into the terminal as a keyboard does: each key's keydown carries its
// text, so that the browser makes the keypress only when the page did not take the keydown
// (xterm.js takes most keys there). chromedp.KeyEvent sends the keypress as an event of its
// own, which xterm.js would take as a second key: "eecchhoo".
func termKeys(text string) Act {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		for _, r := range text {
			var down, up *input.DispatchKeyEventParams
			for _, k := range kb.Encode(r) {
				switch k.Type {
				case kb.KeyDown:
					down = k
				case kb.KeyUp:
					up = k
				case kb.KeyChar:
					down.Text, down.UnmodifiedText = k.Text, k.UnmodifiedText
				}
			}
			for _, k := range []*input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, tg, input.DispatchKeyEvent, *k); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// typeLine types a line into the terminal and Enter.
func typeLine(line string) Act {
	return termKeys(line + kb.Enter)
}

// connected waits until the terminal page is connected.
func connected() Act {
	return chromedp.Steps(ready("terminal"), until(`document.body.dataset.terminalState === "connected"`))
}

// apiCall makes an API request with the instance's token and returns its status and body.
func apiCall(t *testing.T, srv *instance, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+srv.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// startTerminal starts a terminal in dir through the API and returns its name; the test ends
// it.
func startTerminal(t *testing.T, srv *instance, dir string) string {
	t.Helper()
	status, body := apiCall(t, srv, http.MethodPost, "api/terminals", fmt.Sprintf(`{"cwd": %q}`, dir))
	if status != http.StatusOK {
		t.Fatalf("POST /api/terminals: %d %s", status, body)
	}
	var m struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Name == "" {
		t.Fatalf("POST /api/terminals: %s (%v)", body, err)
	}
	t.Cleanup(func() { apiCall(t, srv, http.MethodDelete, "api/terminals/"+m.Name, "") })
	return m.Name
}

// tab is another tab of the test's browser (opts: an existing one, chromedp.WithTargetID);
// it closes with the test. Its first action attaches it with no deadline, as browser's does:
// a deadline would end it after the step that attached it.
func tab(t *testing.T, ctx context.Context, opts ...chromedp.ContextOption) context.Context {
	t.Helper()
	tctx, cancel := chromedp.NewContext(ctx, opts...)
	if err := chromedp.Do(tctx); err != nil {
		cancel()
		t.Fatalf("a tab: %v", err)
	}
	t.Cleanup(cancel)
	return tctx
}

// cspViolations makes every page of the tab count the Content-Security-Policy violations it
// meets into window.cspViolations, from before its first script.
func cspViolations() Act {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.cspViolations = [];
document.addEventListener('securitypolicyviolation', (e) => window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));`})
		return err
	})
}

// A person starts a terminal from the dashboard's New terminal: its page opens in a new tab,
// in the folder the dashboard shows, and runs what is typed.
func TestTerminal_NewFromTheDashboardRunsACommandInTheFolder(t *testing.T) {
	srv := nbkube(t)
	dir := srv.dir(t)
	ctx := browser(t)
	run(t, ctx, "the dashboard offers New terminal", time.Minute,
		chromedp.Navigate(srv.url+"tree/"+dir+"?token="+srv.token),
		ready("dashboard"),
		until(`!document.querySelector('[data-action="new-terminal"]').hidden`),
	)
	opened := chromedp.WaitNewTarget(ctx, func(i *target.Info) bool { return strings.Contains(i.URL, "/terminals/") })
	// A click of the mouse, as a person's: a tab opened by a script alone is a popup.
	run(t, ctx, "New terminal", time.Minute, chromedp.Click(chromedp.CSS(`[data-action="new-terminal"]`)))
	var id target.ID
	select {
	case id = <-opened:
	case <-time.After(2 * time.Minute):
		t.Fatal("New terminal opened no tab at a terminal's page")
	}
	tctx := tab(t, ctx, chromedp.WithTargetID(id))
	var loc, title string
	run(t, tctx, "the terminal runs a command", 2*time.Minute,
		connected(),
		into(chromedp.Location(), &loc),
		into(chromedp.Evaluate[string](`document.title`), &title),
		chromedp.Click(chromedp.CSS(`.xterm-screen`)),
		typeLine("echo $((6*7))"),
		termLine("42"),
		typeLine("pwd"),
		termShows(fmt.Sprintf(`l.endsWith(%q)`, "/"+dir)),
	)
	name := loc[strings.LastIndex(loc, "/")+1:]
	if title != "Terminal "+name+" – nbkube" {
		t.Errorf("the terminal page's title is %q (at %s)", title, loc)
	}
	// The dashboard lists it, running.
	run(t, ctx, "the running terminal in the dashboard", time.Minute,
		until(fmt.Sprintf(`!!document.querySelector('tr[data-terminal=%q] a[href$="/terminals/%s"]')`, name, name)),
	)
	if status, body := apiCall(t, srv, http.MethodDelete, "api/terminals/"+name, ""); status != http.StatusNoContent {
		t.Errorf("DELETE the terminal: %d %s", status, body)
	}
}

// The terminal page: a second client gets the output so far, the policy refuses nothing it
// needs, it fits the window (the shell sees the new size), copies and pastes, reconnects with
// the replay when its connection drops, and says so when the shell exits.
func TestTerminal_PageReplaysFitsCopiesPastesReconnectsAndEnds(t *testing.T) {
	srv := nbkube(t)
	dir := srv.dir(t)
	name := startTerminal(t, srv, dir)
	ctx := browser(t)
	run(t, ctx, "open the page", time.Minute,
		cspViolations(),
		chromedp.Navigate(srv.url+"terminals/"+name+"?token="+srv.token),
		connected(),
		chromedp.Click(chromedp.CSS(`.xterm-screen`)),
		typeLine("echo first-$((1+1))"),
		termLine("first-2"),
	)
	// Another tab on the same terminal starts with what it showed.
	other, cancel := chromedp.NewContext(ctx)
	run(t, other, "a second client", time.Minute,
		chromedp.Navigate(srv.url+"terminals/"+name),
		connected(),
		termLine("first-2"),
	)
	cancel() // its tab closes: its size no longer counts
	if v := eval[[]string](t, ctx, `window.cspViolations`); len(v) != 0 {
		t.Errorf("the page's policy refused: %v", v)
	}
	screenshot(t, ctx, "terminal")

	// The window's size is the terminal's: narrower, and the shell sees it.
	sizeOf := func(tag string) (rows, cols int) {
		t.Helper()
		var line string
		match := fmt.Sprintf(`/^%s \d+ \d+$/.test(l)`, tag)
		run(t, ctx, "the size "+tag, time.Minute,
			typeLine("echo "+tag+" $(stty size)"),
			termShows(match),
			into(chromedp.Evaluate[string](termLines+".find(l => "+match+")"), &line),
		)
		if _, err := fmt.Sscanf(line, tag+" %d %d", &rows, &cols); err != nil {
			t.Fatalf("stty size says %q", line)
		}
		if shown := eval[int](t, ctx, `document.querySelectorAll('.xterm-rows > div').length`); shown != rows {
			t.Errorf("%s: the shell has %d rows, the page shows %d", tag, rows, shown)
		}
		return rows, cols
	}
	rows, cols := sizeOf("before")
	run(t, ctx, "a smaller window", time.Minute,
		chromedp.EmulateViewport(700, 400),
		until(fmt.Sprintf(`document.querySelectorAll('.xterm-rows > div').length < %d`, rows)),
	)
	if r, c := sizeOf("after"); r >= rows || c >= cols {
		t.Errorf("the shell's size in a smaller window: %dx%d, before %dx%d", r, c, rows, cols)
	}

	// Copy: a double click selects a word of the output, Ctrl-C copies it (with a selection
	// it is not an interrupt); Ctrl-V pastes it after what is typed.
	var at struct{ X, Y float64 }
	run(t, ctx, "a word to copy", time.Minute,
		typeLine("clear; echo copy$((5*5))me"),
		termLine("copy25me"),
		into(chromedp.Evaluate[struct{ X, Y float64 }](`(() => {
			const row = [...document.querySelectorAll('.xterm-rows > div')].find(d => d.textContent.trim() === 'copy25me');
			const r = row.getBoundingClientRect();
			return { X: r.left + 20, Y: r.top + r.height / 2 };
		})()`), &at),
	)
	run(t, ctx, "copy and paste", time.Minute,
		chromedp.MouseClickXY(at.X, at.Y, chromedp.ClickCount(2)),
		chromedp.KeyEvent("c", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		termKeys("echo pasted-"),
		chromedp.KeyEvent("v", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		termKeys(kb.Enter),
		termLine("pasted-copy25me"),
	)

	// A dropped connection comes back by itself; the server replays the output, and keys
	// work again.
	run(t, ctx, "before the cut", time.Minute, typeLine("echo before-$((2+2))"), termLine("before-4"))
	if n := srv.proxy.cut(); n == 0 {
		t.Fatal("no connection to cut")
	}
	run(t, ctx, "reconnected", time.Minute,
		until(`document.body.dataset.terminalConnections === "2" && document.body.dataset.terminalState === "connected"`),
		termLine("before-4"),
		typeLine("echo after-$((3+3))"),
		termLine("after-6"),
	)

	// The shell exits: the page says so and leads back to the dashboard.
	run(t, ctx, "exit", time.Minute,
		typeLine("exit"),
		until(`document.body.dataset.terminalState === "ended"`),
		until(`document.querySelector('[role=alert]').innerText.includes("has ended")`),
		until(`!!document.querySelector('a.nb-terminal-back')`),
	)
	if s := eval[string](t, ctx, `document.querySelector('.nb-terminal-state').textContent`); s != "Ended" {
		t.Errorf("the header says %q", s)
	}
}

// The dashboard's running terminals: each links to its page, and Shut down ends it; a page
// open on it says the terminal ended.
func TestDashboard_RunningTerminalsShutDown(t *testing.T) {
	srv := nbkube(t)
	dir := srv.dir(t)
	name := startTerminal(t, srv, dir)
	ctx := browser(t)
	row := fmt.Sprintf(`document.querySelector('tr[data-terminal=%q]')`, name)
	run(t, ctx, "the running terminal", time.Minute,
		chromedp.Navigate(srv.url+"tree/"+dir+"?token="+srv.token),
		ready("dashboard"),
		until(row+fmt.Sprintf(` && %s.querySelector('a').getAttribute('href').endsWith("/terminals/%s")`, row, name)),
	)
	other := tab(t, ctx)
	run(t, other, "its page", time.Minute, chromedp.Navigate(srv.url+"terminals/"+name), connected())
	run(t, ctx, "shut it down", time.Minute,
		press("Shut down terminal "+name),
		until("!"+row),
	)
	run(t, other, "its page says it ended", time.Minute,
		until(`document.body.dataset.terminalState === "ended"`),
		until(`document.querySelector('[role=alert]').innerText.includes("has ended")`),
	)
	testenv.Eventually(t, "the terminal gone from the API", time.Minute, func() error {
		if status, body := apiCall(t, srv, http.MethodGet, "api/terminals/"+name, ""); status != http.StatusNotFound {
			return fmt.Errorf("GET /api/terminals/%s: %d %s", name, status, body)
		}
		return nil
	})
}

// The page of a terminal that does not exist (shut down, someone else's, or a server without
// terminals) says so, under the pages' policy, and leads back to the dashboard.
func TestTerminal_PageOfNoTerminalSaysSo(t *testing.T) {
	srv := nbkube(t)
	ctx := browser(t)
	run(t, ctx, "the page of no terminal", time.Minute,
		cspViolations(),
		chromedp.Navigate(srv.url+"terminals/nope?token="+srv.token),
		ready("terminal"),
		until(`document.body.dataset.terminalState === "ended"`),
		until(`document.querySelector('[role=alert]').innerText.includes("There is no terminal nope")`),
	)
	screenshot(t, ctx, "terminal-none")
	if v := eval[[]string](t, ctx, `window.cspViolations`); len(v) != 0 {
		t.Errorf("the page's policy refused: %v", v)
	}
	if href := eval[string](t, ctx, `document.querySelector('a.nb-terminal-back').getAttribute('href')`); !strings.HasSuffix(srv.url, href) {
		t.Errorf("the way back leads to %s", href)
	}
	if title := eval[string](t, ctx, `document.title`); title != "Terminal nope – nbkube" {
		t.Errorf("title %q", title)
	}
}
