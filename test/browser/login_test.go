package browser

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The printed URL logs the browser in; /logout ends the login, after which the dashboard
// sends the browser to the login page; the login form takes the token and brings it back.
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

	var message string
	run(t, ctx, "log out", time.Minute,
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
