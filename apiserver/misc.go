package apiserver

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/domainerr"
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
	q, err := s.quota(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, jupyter.Status{
		Started:      jupyter.Time{Time: s.started},
		LastActivity: jupyter.Time{Time: s.opts.Clock.Now()},
		Kernels:      kernels,
		Connections:  connections,
		Quota:        q,
	})
	return nil
}

// quota is the request's user's usage and limits, nil without quotas.
func (s *Server) quota(c *gin.Context) (*jupyter.Quota, error) {
	if s.opts.Quotas == nil {
		return nil, nil
	}
	return s.opts.Quotas.Quota(c.Request.Context(), *userOf(c))
}

// getMe is Jupyter Server 2's identity endpoint: who the user is and, for the resources and
// actions ?permissions= asks about (a JSON object of resource → actions), those the user may
// take, each resource answered with the subset of its actions allowed.
func (s *Server) getMe(c *gin.Context) error {
	asked := map[string][]string{}
	if q := c.Query("permissions"); q != "" {
		var raw map[string]any
		if err := json.Unmarshal([]byte(q), &raw); err != nil || raw == nil {
			return badPermissions(q)
		}
		for resource, v := range raw {
			list, ok := v.([]any)
			if !ok {
				return badPermissions(q)
			}
			actions := make([]string, 0, len(list))
			for _, a := range list {
				action, ok := a.(string)
				if !ok {
					return badPermissions(q)
				}
				actions = append(actions, action)
			}
			asked[resource] = actions
		}
	}
	u := userOf(c)
	allowed := make(map[string][]string, len(asked))
	for resource, actions := range asked {
		allowed[resource] = []string{}
		for _, a := range actions {
			if slices.Contains(s.permissions(resource), a) {
				allowed[resource] = append(allowed[resource], a)
			}
		}
	}
	q, err := s.quota(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, jupyter.Me{
		Identity: jupyter.Identity{
			Username:    u.Name,
			Name:        u.Display(),
			DisplayName: u.Display(),
			Initials:    initials(u.Display()),
		},
		Permissions: allowed,
		Quota:       q,
	})
	return nil
}

// permissions are the actions on Jupyter Server 2's authorization resources that every user
// may take on their own things here (admins take them on everyone's): read is GET, write
// changes, execute runs code through a kernel's channels or types in a terminal. Kernel specs
// are managed with kubectl, not through the API; nbkube serves no server shutdown or config,
// so those are allowed nothing; terminals only when the server runs them. Events: each user
// reads (subscribes to) and writes (posts) their own.
var permissions = map[string][]string{
	"api":         {"read"},
	"contents":    {"read", "write"},
	"csp":         {"write"},
	"events":      {"read", "write"},
	"clusters":    {"read", "write"},
	"kernels":     {"read", "write", "execute"},
	"kernelspecs": {"read"},
	"nbconvert":   {"read"},
	"sessions":    {"read", "write"},
	"terminals":   {"read", "write", "execute"},
}

// permissions are the actions allowed on resource.
func (s *Server) permissions(resource string) []string {
	if resource == "terminals" && s.opts.Terminals == nil {
		return nil
	}
	return permissions[resource]
}

// badPermissions is Jupyter's answer to a ?permissions= that is not an object of lists of
// strings, quoting what it got as Python's repr does.
func badPermissions(got string) error {
	quoted := "'" + got + "'"
	if strings.Contains(got, "'") && !strings.Contains(got, `"`) {
		quoted = `"` + got + `"`
	}
	return domainerr.Invalid(`permissions should be a JSON dict of {"resource": ["action",]}, got %s`, quoted)
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
