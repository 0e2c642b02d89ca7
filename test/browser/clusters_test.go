package browser

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nbkube/nbkube/internal/testenv"
)

// me is the name the server knows the token's user by.
func (i *instance) me(t *testing.T) string {
	t.Helper()
	var me struct {
		Identity struct {
			Username string `json:"username"`
		} `json:"identity"`
	}
	apiGet(t, i, "api/me", &me)
	if me.Identity.Username == "" {
		t.Fatal("GET /api/me: no user name")
	}
	return me.Identity.Username
}

// kubectl runs kubectl against the instance's cluster, with stdin.
func (i *instance) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.KubeBinDir(), "kubectl"), append([]string{"--kubeconfig", i.local.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// The dashboard's clusters: a user's profile is listed stopped, starts with the number of
// engines typed, shows them ready, and stops.
func TestDashboard_ClustersStartWithNEnginesAndStop(t *testing.T) {
	srv := nbkube(t)
	profile := "browser-par"
	srv.kubectl(t, fmt.Sprintf(`apiVersion: nbkube.io/v1alpha1
kind: Cluster
metadata:
  name: %s
  namespace: default
spec:
  owner: %s
  state: Stopped
  engines: 1
`, profile, srv.me(t)), "apply", "-f", "-")
	t.Cleanup(func() { srv.kubectl(t, "", "delete", "cluster", profile, "--ignore-not-found", "--wait=false") })

	ctx := browser(t)
	row := fmt.Sprintf(`document.querySelector('[data-profile=%q]')`, profile)
	run(t, ctx, "the stopped profile", time.Minute,
		chromedp.Navigate(srv.url+"?token="+srv.token),
		ready("dashboard"),
		until(row+` && `+row+`.dataset.status === "stopped"`),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const i = %s.querySelector('input[type=number]'); i.focus(); i.select(); })()`, row)),
		chromedp.KeyEvent("2"),
		press("Start "+profile),
		until(row+`.dataset.status === "running"`),
		until(fmt.Sprintf(`/^2\b/.test(%s.cells[3].textContent)`, row)),
	)
	screenshot(t, ctx, "dashboard-cluster")
	out := srv.kubectl(t, "", "get", "cluster", profile, "-o", "jsonpath={.spec.engines} {.status.readyEngines}")
	if !strings.HasPrefix(out, "2 2") {
		t.Errorf("the Cluster after Start with 2: %q", out)
	}
	run(t, ctx, "stop", 2*time.Minute,
		press("Stop "+profile),
		until(row+`.dataset.status === "stopped"`),
	)
}

// A user makes a cluster from the dashboard: a name and a number of engines typed into the
// New cluster form start a Cluster of theirs, listed running with its engines ready; Delete,
// once confirmed, takes it away.
func TestDashboard_ANewClusterIsMadeRunsAndIsDeleted(t *testing.T) {
	srv := nbkube(t)
	profile := "made-here"
	t.Cleanup(func() { srv.kubectl(t, "", "delete", "cluster", profile, "--ignore-not-found", "--wait=false") })

	ctx := browser(t)
	row := fmt.Sprintf(`document.querySelector('[data-profile=%q]')`, profile)
	run(t, ctx, "make a cluster", 2*time.Minute,
		chromedp.Navigate(srv.url+"?token="+srv.token),
		ready("dashboard"),
		until(`!document.querySelector('form.nb-new-cluster').hidden`),
		chromedp.SendKeys(chromedp.CSS(`#nb-new-cluster-name`), profile),
		chromedp.Evaluate[chromedp.Void](`(() => { const i = document.querySelector('#nb-new-cluster-engines'); i.focus(); i.select(); })()`),
		chromedp.KeyEvent("1"),
		press("Create"),
		until(row+` && `+row+`.dataset.status === "running"`),
		until(`document.querySelector('#nb-new-cluster-name').value === ""`),
		until(fmt.Sprintf(`/^1 \/ 1$/.test(%s.cells[3].textContent)`, row)),
	)
	screenshot(t, ctx, "dashboard-new-cluster")
	out := srv.kubectl(t, "", "get", "cluster", profile, "-o", "jsonpath={.spec.owner} {.spec.engines} {.status.readyEngines}")
	if want := srv.me(t) + " 1 1"; out != want {
		t.Errorf("the Cluster made from the dashboard: %q, want %q", out, want)
	}

	run(t, ctx, "delete it", time.Minute,
		press("Delete "+profile),
		until(`!!document.querySelector('dialog[open]')`),
		confirm("Delete"),
		until(`!`+row),
	)
	out = srv.kubectl(t, "", "get", "clusters", "-o", "name")
	if strings.Contains(out, profile) {
		t.Errorf("the cluster is still there after Delete: %q", out)
	}
}

// A user makes a Dask cluster from the dashboard: Dask chosen in the New cluster form, the
// row says so and counts its worker; its Dashboard link, once the scheduler runs, opens the
// scheduler's own pages through nbkube (Debian's Dask, without Bokeh, says what its
// dashboard needs; an image with Bokeh shows it).
func TestDashboard_ADaskClusterLinksItsDashboard(t *testing.T) {
	srv := nbkube(t)
	profile := "dask-here"
	t.Cleanup(func() { srv.kubectl(t, "", "delete", "cluster", profile, "--ignore-not-found", "--wait=false") })

	ctx := browser(t)
	row := fmt.Sprintf(`document.querySelector('[data-profile=%q]')`, profile)
	link := row + `.querySelector('a.nb-dashboard-link')`
	run(t, ctx, "make a dask cluster", 2*time.Minute,
		chromedp.Navigate(srv.url+"?token="+srv.token),
		ready("dashboard"),
		until(`!document.querySelector('form.nb-new-cluster').hidden`),
		chromedp.SendKeys(chromedp.CSS(`#nb-new-cluster-name`), profile),
		chromedp.SetValue(`#nb-new-cluster-framework`, "dask"),
		chromedp.Evaluate[chromedp.Void](`(() => { const i = document.querySelector('#nb-new-cluster-engines'); i.focus(); i.select(); })()`),
		chromedp.KeyEvent("1"),
		press("Create"),
		until(row+` && `+row+`.dataset.status === "running"`),
		until(fmt.Sprintf(`%s.cells[1].textContent === "Dask" && /^1 \/ 1$/.test(%s.cells[3].textContent)`, row, row)),
		until(`!`+link+`.hidden`),
	)
	out := srv.kubectl(t, "", "get", "cluster", profile, "-o", "jsonpath={.spec.framework} {.status.readyEngines}")
	if out != "dask 1" {
		t.Errorf("the Cluster made from the dashboard: %q, want a dask one with its worker", out)
	}
	var href string
	run(t, ctx, "the dashboard's link", time.Minute,
		into(chromedp.Evaluate[string](link+`.getAttribute('href')`), &href),
	)
	if href != "/dask/"+profile+"/" {
		t.Fatalf("the dashboard link is %q", href)
	}
	run(t, ctx, "the scheduler's page through nbkube", time.Minute,
		chromedp.Navigate(strings.TrimSuffix(srv.url, "/")+href),
		until(`location.pathname === "/dask/`+profile+`/status" && document.body.textContent.includes("Dask")`),
	)
}
