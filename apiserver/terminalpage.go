package apiserver

import (
	"net/http"
	"regexp"

	"github.com/gin-gonic/gin"
)

// The terminal's page, at Notebook 6's address /terminals/<name>: xterm.js in the page,
// speaking to /terminals/websocket/<name>. Gin routes the WebSocket's static segment before
// this route's parameter, so the two share the prefix without either shadowing the other
// (TestTerminalPage_ServedBesideTheWebSocketRoute).
//
// The route does not look the terminal up: the page asks GET /api/terminals/<name> itself and
// says when there is no such terminal (shut down, ended, someone else's, or terminals off),
// as it must anyway when the terminal ends while the page is open. So the page needs nothing
// of the terminals' repository and answers alike for a terminal that never existed and one
// that is another user's.

// terminalName matches the names a terminal page serves: Jupyter's (\w+, which nbkube's
// numbers are) and, for other servers' names, "-"; no "." (".." would make the page's API
// requests climb out of /api/terminals/).
var terminalName = regexp.MustCompile(`^[\w-]{1,100}$`)

// getTerminalPage is GET /terminals/<name>: the terminal's page.
func (s *Server) getTerminalPage(c *gin.Context) {
	name := c.Param("name")
	if !terminalName.MatchString(name) {
		s.renderMessage(c, http.StatusNotFound, "Not found", "There is no terminal "+name+".", "")
		return
	}
	s.renderPage(c, "Terminal "+name+" - nbkube", pageConfig{Page: "terminal", Terminal: name})
}
