package browser

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The printed URL logs the browser in; /logout ends the login, after which the dashboard
// sends the browser to the login page; the login form takes the token and brings it back.
// Only nbkube's own pages (or the address typed in) log out: another site's link does not.
func TestLogin_WithTheTokenTheFormAndLogout(t *testing.T) {
	srv := nbkube(t)
	ctx := browser(t)

	var loc, title string
	run(t, ctx, "open the printed URL", time.Minute,
		chromedp.Navigate(srv.url+"?token="+srv.token),
		ready("dashboard"),
		into(chromedp.Location(), &loc),
		into(chromedp.Title(), &title),
	)
	if strings.Contains(loc, "/login") || !strings.Contains(title, "nbkube") {
		t.Errorf("the printed URL shows %q at %s", title, loc)
	}

	// A link on another site's page does not log the browser out. The page is served from
	// "localhost", another site than 127.0.0.1 for the browser.
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!DOCTYPE html><a id="out" href="%slogout">a prize</a>`, srv.url)
	}))
	defer foreign.Close()
	var refused string
	run(t, ctx, "follow another site's logout link", time.Minute,
		chromedp.Navigate(strings.Replace(foreign.URL, "127.0.0.1", "localhost", 1)),
		chromedp.Click(chromedp.CSS(`#out`)),
		until(`location.pathname.endsWith("/logout")`),
		into(chromedp.Text(chromedp.CSS(`body`)), &refused),
		chromedp.Navigate(srv.url),
		ready("dashboard"),
	)
	if !strings.Contains(refused, "another site") {
		t.Errorf("another site's logout link shows %q", refused)
	}

	// The pages' own "Log out" link, and the address typed in, log out.
	var message string
	run(t, ctx, "log out with the page's link", time.Minute,
		chromedp.Click(chromedp.CSS(`a.nb-logout`)),
		chromedp.WaitVisible(chromedp.CSS(`[role=status]`)),
		into(chromedp.Text(chromedp.CSS(`[role=status]`)), &message),
		chromedp.Navigate(srv.url),
		chromedp.WaitVisible(chromedp.CSS(`input[name=password]`)),
		into(chromedp.Location(), &loc),
	)
	if !strings.Contains(message, "logged out") || !strings.Contains(loc, "/login?next=") {
		t.Errorf("after logout: %q, then / lands at %s", message, loc)
	}
	run(t, ctx, "log in again with the printed URL, and out by the address", time.Minute,
		chromedp.Navigate(srv.url+"?token="+srv.token),
		ready("dashboard"),
		chromedp.Navigate(srv.url+"logout"),
		into(chromedp.Text(chromedp.CSS(`[role=status]`)), &message),
		chromedp.Navigate(srv.url),
		chromedp.WaitVisible(chromedp.CSS(`input[name=password]`)),
		into(chromedp.Location(), &loc),
	)
	if !strings.Contains(message, "logged out") || !strings.Contains(loc, "/login?next=") {
		t.Errorf("after logout: %q, then / lands at %s", message, loc)
	}

	// The login form with the token goes back where the browser was going.
	run(t, ctx, "log in with the form", time.Minute,
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), srv.token),
		chromedp.Submit(chromedp.CSS(`input[name=password]`)),
		ready("dashboard"),
		into(chromedp.Location(), &loc),
	)
	if strings.Contains(loc, "/login") {
		t.Errorf("after the login form: %s", loc)
	}
}
