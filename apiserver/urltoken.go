package apiserver

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/websocket"
)

// A token in a page's address is readable by the page's scripts (location.href), and
// /files and /nbconvert show users' own HTML, whose scripts the sandbox lets run: an admin
// who opens /files/ben.html?token=... would hand ben's script the admin's token. So a
// browser's navigation that logs in by ?token= gets the login cookie and is sent on to the
// same address without the token before any page is shown; other requests (an API client,
// JupyterLab's WebSocket, which connects with ?token=) are served as they come. And a
// request from an opaque origin (a sandboxed page, a local file) is refused even with a
// token: it is how a user's page would use a token it got hold of, from the reader's browser.

// navigation reports whether a browser asks for the request's answer to show it as a page
// (a window's or a frame's document). Browsers say so in Sec-Fetch-Mode; those that do not
// send it (older ones, or over plain HTTP to another host than localhost) ask for text/html
// when they navigate, which fetch() and API clients do not unless told to.
func navigation(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead || websocket.IsWebSocketUpgrade(r) {
		return false
	}
	if mode := r.Header.Get("Sec-Fetch-Mode"); mode != "" {
		return mode == "navigate" || mode == "nested-navigate"
	}
	return wantsPage(r)
}

// withoutToken is the address of u without its token parameters, the others as they came.
// The path is the request's own, but never one a browser would read as another host's
// ("//evil.example/"): it starts with a single "/", and EscapedPath escapes "\" and controls.
func withoutToken(u *url.URL) string {
	var kept []string
	for part := range strings.SplitSeq(u.RawQuery, "&") {
		key, _, _ := strings.Cut(part, "=")
		if k, err := url.QueryUnescape(key); part == "" || err == nil && k == "token" {
			continue
		}
		kept = append(kept, part)
	}
	target := "/" + strings.TrimLeft(u.EscapedPath(), "/")
	if len(kept) > 0 {
		target += "?" + strings.Join(kept, "&")
	}
	return target
}

// opaqueOrigin reports whether the request comes from a page that has no origin of its own:
// a CSP or iframe sandbox (user content in /files and /nbconvert), a data: URL, a local file.
func opaqueOrigin(r *http.Request) bool {
	return strings.EqualFold(strings.TrimSpace(r.Header.Get("Origin")), "null")
}
