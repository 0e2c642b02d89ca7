package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httputil"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/jupyter"
)

// daskDashboard is GET <base>dask/<cluster>/..., nbkube's own: a dask cluster's scheduler
// dashboard (its HTTP pages and JSON, and Bokeh's WebSockets where the image has Bokeh),
// proxied to the scheduler for the cluster's owner only. GET only: the scheduler's own API
// (retiring workers) is the operator's, not the browser's. The scheduler serves its routes under the
// same prefix (builder.DaskDashboardPrefix), so the path goes as it came and the pages' own
// links stay right. nbkube's credentials (the token, the cookies) do not go on to the
// scheduler, which runs the owner's image.
func (s *Server) daskDashboard(c *gin.Context) error {
	id := c.Param("id")
	addr, err := s.opts.Clusters.Dashboard(c.Request.Context(), *userOf(c), id)
	if err != nil {
		return err
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", addr
			r.Out.Host = addr
			r.Out.Header.Del("Authorization")
			r.Out.Header.Del("Cookie")
			r.Out.Header.Del("X-XSRFToken")
			q := r.Out.URL.Query()
			if q.Has("token") {
				q.Del("token")
				r.Out.URL.RawQuery = q.Encode()
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			// The scheduler sets no cookie of this server's.
			resp.Header.Del("Set-Cookie")
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			s.opts.Log.V(1).Info("Proxying a dask dashboard", "cluster", id, "error", err.Error())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			_ = json.NewEncoder(w).Encode(jupyter.Error{Message: "The cluster's scheduler did not answer"})
		},
	}
	proxy.ServeHTTP(c.Writer, c.Request)
	return nil
}
