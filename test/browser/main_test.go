// Package browser tests nbkube's web pages as a person uses them: in a real browser (Debian's
// chromium, driven by chromedp) against `nbkube local` with real ipykernel kernels. One
// instance serves the package's tests, each in a directory of its own and a browser tab of
// its own. Screenshots are kept in bin/test-artifacts/browser.
package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nbkube/nbkube/internal/testenv"
	"github.com/nbkube/nbkube/web"
)

var (
	binDir string

	serverOnce sync.Once
	server     *instance
	serverErr  error
)

// instance is the running `nbkube local`.
type instance struct {
	local *testenv.Local
	url   string // the base URL (through proxy), without the token
	token string
	proxy *proxy
	root  string
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nbkube-browser-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	if server != nil {
		server.stop()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// nbkube is the package's instance, started on first use with the binaries of this tree.
func nbkube(t *testing.T) *instance {
	t.Helper()
	if !web.Built() {
		testenv.Missing(t, "the web pages are not built (make web)")
	}
	if _, err := exec.LookPath(chromiumPath()); err != nil {
		testenv.Missing(t, "no chromium (apt-get install chromium): %v", err)
	}
	serverOnce.Do(func() { server, serverErr = start() })
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return server
}

func start() (*instance, error) {
	if err := testenv.BuildCommands(binDir, "nbkube", "nbkube-agent"); err != nil {
		return nil, err
	}
	root := filepath.Join(binDir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return nil, err
	}
	jupyterPath, err := secondKernelSpec(binDir)
	if err != nil {
		return nil, err
	}
	l, err := testenv.LaunchLocal(testenv.LocalConfig{Bin: filepath.Join(binDir, "nbkube"), DataDir: filepath.Join(binDir, "data"), Root: root,
		Args: []string{"--listen", "127.0.0.1:0"}, LogPath: filepath.Join(binDir, "nbkube-local.log"),
		Env: []string{"JUPYTER_PATH=" + jupyterPath}})
	if err != nil {
		return nil, err
	}
	inst := &instance{local: l, token: l.Token, root: root}
	// The browser reaches nbkube through a proxy that a test can cut.
	u, err := url.Parse(l.URL)
	if err != nil {
		inst.stop()
		return nil, err
	}
	if inst.proxy, err = newProxy(u.Host); err != nil {
		inst.stop()
		return nil, err
	}
	u.Host = inst.proxy.addr()
	inst.url = u.String()
	return inst, nil
}

// secondKernelSpec makes a Jupyter data directory with a second Python kernel spec,
// "python3-second", so that a test can change a notebook's kernel to another: the host's
// host's python3 under another name. It returns the directory, for
// JUPYTER_PATH (the host's own specs are found after it).
func secondKernelSpec(dir string) (string, error) {
	jp := filepath.Join(dir, "jupyter")
	spec := filepath.Join(jp, "kernels", "python3-second")
	if err := os.MkdirAll(spec, 0o755); err != nil {
		return "", err
	}
	kernel := `{"argv": ["/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
 "display_name": "Python 3 (second)", "language": "python"}`
	return jp, os.WriteFile(filepath.Join(spec, "kernel.json"), []byte(kernel), 0o644)
}

func (i *instance) stop() {
	if i.proxy != nil {
		i.proxy.close()
	}
	if err := i.local.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "nbkube local:", err)
	}
}

// dir makes a directory of the contents root for one test, and returns its name.
func (i *instance) dir(t *testing.T) string {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	if err := os.MkdirAll(filepath.Join(i.root, name), 0o755); err != nil {
		t.Fatal(err)
	}
	return name
}

func chromiumPath() string {
	if p := os.Getenv("NBKUBE_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// browser is a fresh browser (its own profile: no cookies) for one test; it ends with the
// test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath()),
		chromedp.NoSandbox, // root in CI
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1280, 900),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	// The first action starts the browser, with no deadline: a deadline would end it.
	if err := chromedp.Do(ctx); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return ctx
}

// Act is a step of a test in the browser.
type Act = chromedp.Action[chromedp.Void]

// run runs steps with a deadline, failing the test with what the page shows on an error.
func run(t *testing.T, ctx context.Context, what string, timeout time.Duration, steps ...Act) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		loc, _ := chromedp.Run(lctx, chromedp.Location())
		shown, _ := chromedp.Run(lctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
		screenshot(t, ctx, "failed-"+strings.NewReplacer(" ", "-", "/", "-").Replace(t.Name()+"-"+what))
		t.Fatalf("%s: %v\nat %s, the page shows:\n%s", what, err, loc, shown)
	}
}

// into is a step that keeps the value of a into out.
func into[T any](a chromedp.Action[T], out *T) Act {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		v, err := a(ctx, tg)
		*out = v
		return chromedp.Void{}, err
	}
}

// screenshot keeps a picture of the page's window (as a person sees it: sticky bars where
// they stay) as a test artifact.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	dir := filepath.Join("..", "..", "bin", "test-artifacts", "browser")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Logf("screenshot %s: %v", name, err)
	}
}

// ready waits until the page says it is ready as kind (document.body.dataset.ready).
func ready(kind string) Act {
	return until(fmt.Sprintf(`document.body && document.body.dataset.ready === %q`, kind))
}

// until waits until the JavaScript expression is true. It asks again and again from Go
// rather than polling in the page, so that a navigation meanwhile (a click on a link, a form
// sent) only makes it ask the next page.
func until(expr string) Act {
	check := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { try { return !!(%s); } catch (e) { return false; } })()`, expr))
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for {
			ok, err := check(ctx, tg)
			if err == nil && ok {
				return chromedp.Void{}, nil
			}
			select {
			case <-ctx.Done():
				if err != nil {
					return chromedp.Void{}, fmt.Errorf("waiting until %s: %w (the last ask failed: %w)", expr, ctx.Err(), err)
				}
				return chromedp.Void{}, fmt.Errorf("waiting until %s: %w", expr, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// eval evaluates a JavaScript expression now.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ectx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ectx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// apiGet reads an API answer with the instance's token.
func apiGet(t *testing.T, srv *instance, path string, out any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "token "+srv.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}
