package browser

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nbkube/nbkube/internal/testenv"
)

// row waits for the dashboard's row of path.
func row(path string) Act {
	return chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-path=%q]`, path)))
}

// noRow waits until the dashboard has no row of path.
func noRow(path string) Act {
	return until(fmt.Sprintf(`!document.querySelector('[data-path=%q]')`, path))
}

func TestDashboard_ListNavigateUploadNewDeleteAndLiveUpdates(t *testing.T) {
	srv := nbkube(t)
	dir := srv.dir(t)
	for _, p := range []string{"inner/deep.ipynb", "top.ipynb"} {
		full := filepath.Join(srv.root, dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(`{"cells":[],"metadata":{},"nbformat":4,"nbformat_minor":5}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := browser(t)
	run(t, ctx, "log in", time.Minute, chromedp.Navigate(srv.url+"?token="+srv.token), ready("dashboard"))

	// The directory lists its folder and notebook; the folder's link opens its own page.
	var loc string
	run(t, ctx, "list and navigate", time.Minute,
		chromedp.Navigate(srv.url+"tree/"+dir),
		ready("dashboard"),
		row(dir+"/inner"),
		row(dir+"/top.ipynb"),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`[data-path=%q] a`, dir+"/inner"))),
		row(dir+"/inner/deep.ipynb"),
		into(chromedp.Location(), &loc),
	)
	if !strings.HasSuffix(loc, "/tree/"+dir+"/inner") {
		t.Errorf("the folder opened at %s", loc)
	}
	screenshot(t, ctx, "dashboard")

	// The list follows the disk without a reload.
	if err := os.WriteFile(filepath.Join(srv.root, dir, "inner", "later.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "a file made elsewhere appears", 30*time.Second, row(dir+"/inner/later.txt"))

	// An upload of several chunks arrives whole.
	data := make([]byte, 2<<20+12345)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	local := filepath.Join(t.TempDir(), "big.bin")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "upload", time.Minute,
		chromedp.SetUploadFiles(chromedp.CSS(`input[type=file]`), []string{local}),
		row(dir+"/inner/big.bin"),
	)
	testenv.Eventually(t, "the upload on disk", 30*time.Second, func() error {
		got, err := os.ReadFile(filepath.Join(srv.root, dir, "inner", "big.bin"))
		if err != nil {
			return err
		}
		if !bytes.Equal(got, data) {
			return fmt.Errorf("%d bytes, not the %d uploaded", len(got), len(data))
		}
		return nil
	})

	// Delete, after a confirmation.
	run(t, ctx, "delete", time.Minute,
		press("Delete later.txt"),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open]`)),
		confirm("Delete"),
		noRow(dir+"/inner/later.txt"),
	)
	if _, err := os.Stat(filepath.Join(srv.root, dir, "inner", "later.txt")); !os.IsNotExist(err) {
		t.Errorf("later.txt after delete: %v", err)
	}

	// A new notebook opens with a running kernel, and the dashboard lists it as running.
	run(t, ctx, "new notebook", 2*time.Minute,
		until(`(() => {
			const b = [...document.querySelectorAll('button')].find(b => (b.getAttribute('aria-label') || b.textContent).trim().startsWith('New notebook'));
			if (b) { b.click(); return true; }
			return false;
		})()`),
		ready("notebook"),
		until(`document.body.dataset.kernelStatus === "idle"`),
	)
	if _, err := os.Stat(filepath.Join(srv.root, dir, "inner", "Untitled.ipynb")); err != nil {
		t.Errorf("the new notebook is not in the folder: %v", err)
	}
	run(t, ctx, "running kernels", time.Minute,
		chromedp.Navigate(srv.url+"tree/"+dir+"/inner"),
		ready("dashboard"),
		until(fmt.Sprintf(`document.body.innerText.includes(%q)`, "Untitled.ipynb")),
		press("Shut down "+dir+"/inner/Untitled.ipynb"),
		until(fmt.Sprintf(`![...document.querySelectorAll('[data-session]')].some(r => r.dataset.path === %q)`, dir+"/inner/Untitled.ipynb")),
	)
}
