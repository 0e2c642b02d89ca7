package apiserver

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/jupyter"
)

func (s *Server) getAPIVersion(c *gin.Context) {
	c.JSON(http.StatusOK, jupyter.Version{Version: APIVersion})
}

// getStatus is Jupyter's /api/status: when the server started, the last activity, and the
// user's kernels and their connections.
func (s *Server) getStatus(c *gin.Context) error {
	kernels, connections, err := s.opts.Kernels.CountKernels(c.Request.Context(), *userOf(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, jupyter.Status{
		Started:      jupyter.Time{Time: s.started},
		LastActivity: jupyter.Time{Time: s.opts.Clock.Now()},
		Kernels:      kernels,
		Connections:  connections,
	})
	return nil
}

// getMe is Jupyter Server 2's identity endpoint.
func (s *Server) getMe(c *gin.Context) {
	u := userOf(c)
	c.JSON(http.StatusOK, jupyter.Me{
		Identity: jupyter.Identity{
			Username:    u.Name,
			Name:        u.Name,
			DisplayName: u.Name,
			Initials:    initials(u.Name),
		},
		Permissions: map[string][]string{},
	})
}

func initials(name string) string {
	var b strings.Builder
	for _, f := range strings.FieldsFunc(name, func(r rune) bool { return r == ' ' || r == '.' || r == '-' || r == '_' || r == '@' }) {
		b.WriteString(strings.ToUpper(string([]rune(f)[:1])))
		if b.Len() >= 2 {
			break
		}
	}
	return b.String()
}

// redirectNotebooks sends /api/notebooks/<path> to /api/contents/<path>, as Jupyter Server does
// for clients of the first contents API.
func (s *Server) redirectNotebooks(c *gin.Context) {
	c.Redirect(http.StatusFound, s.opts.BaseURL+"api/contents"+escapePath(strings.TrimPrefix(c.Param("path"), "/"), true))
}

// escapePath escapes each segment of an API path for a URL; withSlash prefixes a "/" when the
// path is not empty.
func escapePath(p string, withSlash bool) string {
	if p == "" {
		return ""
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	out := strings.Join(segs, "/")
	if withSlash {
		return "/" + out
	}
	return out
}
