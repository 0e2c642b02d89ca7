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
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// outputsProbe is a module the tests' cells import: outputs that need JavaScript, each with a
// script that reports to the page (postMessage, the one way out of its frame) what it could
// reach from where it runs. The page's listener is the test's own.
const outputsProbe = `from IPython.display import HTML, Javascript, display

PROBE = """
function probe(f) { try { return 'read: ' + String(f()); } catch (e) { return 'blocked: ' + e.name; } }
function report(kind, text) {
  const r = { kind, text, parent: probe(() => parent.document.title), cookie: probe(() => document.cookie), origin: String(self.origin) };
  fetch('/api/contents', { credentials: 'include' }).then((x) => x.text()).then((t) => { r.api = 'read: ' + t.slice(0, 40); },
    (e) => { r.api = 'blocked: ' + e.name; }).finally(() => top.postMessage(JSON.stringify(r), '*'));
}
"""

def html():
    display(HTML('<div id=x></div><script>document.getElementById("x").textContent="ran"</script>'
                 '<script>' + PROBE + 'report("html", document.getElementById("x").textContent)</script>'))

def javascript():
    display(Javascript(PROBE + 'element.textContent = "js ran"; report("javascript", element.textContent)'))

def nested():
    # folium's way: the map is a page of its own in a srcdoc frame, whose scripts run there.
    page = '<div id=m></div><script>' + PROBE + 'document.getElementById("m").textContent = "map"; report("nested", document.getElementById("m").textContent)</script>'
    display(HTML('<div style="width:100%"><iframe style="width:100%;height:200px;border:none" srcdoc="' + page.replace('&', '&amp;').replace('"', '&quot;') + '"></iframe></div>'))

def widget():
    display({'application/vnd.jupyter.widget-view+json': {'model_id': 'probe', 'version_major': 2, 'version_minor': 0},
             'text/plain': 'IntSlider(value=3)'}, raw=True)
`

// frameReport is what a probe's script found where it ran.
type frameReport struct {
	Kind, Text, Parent, Cookie, Origin, API string
}

// Outputs that need JavaScript run in sandboxed frames of their own, where their scripts run
// and reach neither the page, nor its cookies, nor the API: HTML with scripts, JavaScript,
// a folium-style nested frame, and a Plotly figure, drawn by plotly.js. A pandas table stays
// in the page, and a widget says what it is.
func TestOutputs_ScriptsRunInSandboxedFramesPlotlyPandasWidgets(t *testing.T) {
	srv, dir, ctx, _ := newNotebook(t)
	if err := os.WriteFile(filepath.Join(srv.root, dir, "outputs_probe.py"), []byte(outputsProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "listen to the frames", time.Minute,
		chromedp.Evaluate[chromedp.Void](`window.probes = {}; window.addEventListener('message', (e) => {
			if (typeof e.data === 'string') { const r = JSON.parse(e.data); window.probes[r.kind] = r; } })`),
		runCell(0, "import outputs_probe as p; p.html()"),
		runCell(1, "p.javascript()"),
		runCell(2, "p.nested()"),
		until(`['html', 'javascript', 'nested'].every((k) => window.probes[k])`),
	)
	want := map[string]string{"html": "ran", "javascript": "js ran", "nested": "map"}
	for kind, text := range want {
		var r frameReport
		if err := json.Unmarshal([]byte(eval[string](t, ctx, fmt.Sprintf(`JSON.stringify(window.probes[%q])`, kind))), &r); err != nil {
			t.Fatal(err)
		}
		if r.Text != text {
			t.Errorf("%s: the script saw %q in its frame, want %q", kind, r.Text, text)
		}
		for what, got := range map[string]string{"the page's DOM": r.Parent, "the cookies": r.Cookie, "the API": r.API} {
			if !strings.HasPrefix(got, "blocked") {
				t.Errorf("%s: the output's script reached %s: %s", kind, what, got)
			}
		}
		if r.Origin != "null" {
			t.Errorf("%s: the output's script runs in origin %q, want an opaque one", kind, r.Origin)
		}
	}
	for i := range 3 {
		sel := cellSel(i, ".nb-outputs iframe.nb-frame")
		if sb := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%q).getAttribute('sandbox')`, sel)); sb != "allow-scripts" {
			t.Errorf("cell %d: the frame's sandbox is %q, want allow-scripts alone", i, sb)
		}
	}
	// Sized to their content: the nested frame is 200 pixels high.
	run(t, ctx, "frames sized to their content", time.Minute,
		until(fmt.Sprintf(`document.querySelector(%q).getBoundingClientRect().height >= 200`, cellSel(2, "iframe.nb-frame"))))
	if eval[bool](t, ctx, `!!document.getElementById('x') || document.body.innerText.includes('IPython.core.display')`) {
		t.Error("an output ran in the page, or shows its repr")
	}

	// The first figure of a kernel comes after an HTML output that brings plotly.js into
	// Notebook 6's page (here: into a frame of its own, which shows nothing).
	plotlyFrame := cellSel(4, `iframe.nb-frame[data-mime-type="application/vnd.plotly.v1+json"]`)
	run(t, ctx, "a Plotly figure", 2*time.Minute,
		runCell(3, "import plotly.graph_objects as go"),
		runCell(4, "go.Figure(go.Bar(y=[1, 2, 3]))"),
		until(fmt.Sprintf(`!!document.querySelector(%q)`, plotlyFrame)),
	)
	var bars int
	run(t, ctx, "plotly.js draws the figure in its frame", 2*time.Minute,
		inFrame(plotlyFrame, `document.querySelectorAll('svg.main-svg .bars path').length`, &bars, func(n int) bool { return n == 3 }))
	run(t, ctx, "the figure's frame is as high as the figure", time.Minute,
		until(fmt.Sprintf(`document.querySelector(%q).getBoundingClientRect().height >= 400`, plotlyFrame)))
	run(t, ctx, "show the figure", time.Minute,
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).scrollIntoView({ block: 'center' })`, plotlyFrame)),
		chromedp.Sleep(500*time.Millisecond))
	screenshot(t, ctx, "outputs-plotly")

	run(t, ctx, "a pandas table", 2*time.Minute,
		runCell(5, "import pandas as pd; pd.DataFrame({'a': [1, 2], 'b': [3, 4]})"),
		until(fmt.Sprintf(`document.querySelectorAll(%q).length === 4`, cellSel(5, ".nb-html table.dataframe tbody td"))),
	)
	if eval[bool](t, ctx, fmt.Sprintf(`!!document.querySelector(%q)`, cellSel(5, "iframe"))) {
		t.Error("the pandas table went to a frame")
	}
	run(t, ctx, "a widget", time.Minute,
		runCell(6, "p.widget()"),
		outputHas(6, "This output is an interactive widget (ipywidgets); nbkube’s page does not run widgets yet."),
		outputHas(6, "IntSlider(value=3)"),
	)
	if shown := eval[string](t, ctx, fmt.Sprintf(`document.querySelector(%q).innerText`, cellSel(6, ".nb-outputs"))); strings.Contains(shown, "application/vnd") {
		t.Errorf("the widget's output shows its raw type: %s", shown)
	}
}

// inFrame evaluates expr in the document of the frame the selector finds, until ok holds of
// its value. A sandboxed frame may run in a process of its own (Chrome's isolation of
// sandboxed frames); then it is a target of its own, found by its frame id.
func inFrame[T any](sel, expr string, out *T, ok func(T) bool) Act {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for {
			v, err := frameEval[T](ctx, tg, sel, expr)
			if err == nil && ok(v) {
				*out = v
				return chromedp.Void{}, nil
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("in the frame %s, %s is %v (%w): %w", sel, expr, v, err, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// frameEval evaluates expr once in the frame's document: in a world of its own in the page's
// process, or else in the frame's own target.
func frameEval[T any](ctx context.Context, tg *chromedp.Target, sel, expr string) (T, error) {
	var zero T
	nodes, err := chromedp.Nodes(chromedp.CSS(sel))(ctx, tg)
	if err != nil {
		return zero, err
	}
	if len(nodes) == 0 || nodes[0].FrameID == "" {
		return zero, fmt.Errorf("no frame %s", sel)
	}
	fid := nodes[0].FrameID
	var raw []byte
	if w, err := cdp.Call(ctx, tg, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: fid, WorldName: "test"}); err == nil {
		byValue := true
		r, err := cdp.Call(ctx, tg, runtime.Evaluate, runtime.EvaluateParams{Expression: expr, ContextID: w.ExecutionContextID, ReturnByValue: &byValue})
		if err != nil {
			return zero, err
		}
		if r.ExceptionDetails != nil {
			return zero, fmt.Errorf("%s", r.ExceptionDetails.Text)
		}
		raw = r.Result.Value
	} else {
		fctx, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(target.ID(fid)), chromedp.WithDetachOnCancel())
		defer cancel()
		v, err := chromedp.Run(fctx, chromedp.Evaluate[T](expr))
		if err != nil {
			return zero, fmt.Errorf("in the frame's own target: %w", err)
		}
		return v, nil
	}
	var v T
	err = json.Unmarshal(raw, &v)
	return v, err
}
