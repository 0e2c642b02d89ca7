package apiserver

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

func init() {
	// Gin's debug mode prints every route at start and warns on stdout.
	gin.SetMode(gin.ReleaseMode)
}

func (s *Server) routes() *gin.Engine {
	e := gin.New()
	// Paths are matched undecoded, so that an encoded "/" in a file name stays part of the
	// name until the handler decodes it, as Tornado does.
	e.UseRawPath = true
	e.UnescapePathValues = true
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = true
	e.Use(s.recoverPanics, s.logRequests, s.securityHeaders, s.stripTrailingSlash, s.limitBody)
	e.NoRoute(func(c *gin.Context) { abortJSON(c, http.StatusNotFound, "Not Found", nil) })
	e.NoMethod(func(c *gin.Context) { abortJSON(c, http.StatusMethodNotAllowed, "Method Not Allowed", nil) })

	base := e.Group(s.opts.BaseURL)
	// Unauthenticated, and telling as little as possible.
	base.GET("api", s.getAPIVersion)

	auth := base.Group("", s.authenticate)
	// Jupyter sends "/" to its default page; until nbkube has pages, that is the root
	// listing. The ?token= of the printed URL has logged the browser in on the way.
	auth.GET("", func(c *gin.Context) { c.Redirect(http.StatusFound, s.opts.BaseURL+"api/contents") })
	auth.GET("api/status", s.getStatus)
	auth.GET("api/me", s.getMe)
	auth.GET("api/nbconvert", s.getNbconvert)
	auth.GET("api/kernelspecs", s.getKernelSpecs)
	auth.GET("api/kernelspecs/:name", s.getKernelSpec)
	auth.GET("kernelspecs/:name/*file", s.getKernelSpecResource)
	auth.HEAD("kernelspecs/:name/*file", s.getKernelSpecResource)
	auth.GET("api/kernels", s.listKernels)
	auth.POST("api/kernels", s.startKernel)
	auth.GET("api/kernels/:id", s.getKernel)
	auth.DELETE("api/kernels/:id", s.deleteKernel)
	auth.POST("api/kernels/:id/:action", s.kernelAction)
	auth.GET("api/kernels/:id/channels", s.kernelChannels)
	auth.GET("api/clusters", s.listClusters)
	auth.GET("api/clusters/:id", s.getCluster)
	auth.POST("api/clusters/:id/:action", s.clusterAction)
	auth.GET("api/sessions", s.listSessions)
	auth.POST("api/sessions", s.createSession)
	for _, m := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
		auth.Handle(m, "api/sessions/:id", s.session)
	}
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodPost, http.MethodDelete} {
		auth.Handle(m, "api/notebooks", s.redirectNotebooks)
		auth.Handle(m, "api/notebooks/*path", s.redirectNotebooks)
		auth.Handle(m, "api/contents", s.contents)
		auth.Handle(m, "api/contents/*path", s.contents)
	}
	auth.GET("files/*path", s.getFile)
	auth.HEAD("files/*path", s.getFile)

	// The older IPython interface: notebooks by id in a flat root.
	auth.GET("notebooks", s.listLegacyNotebooks)
	auth.POST("notebooks", s.newLegacyNotebook)
	auth.GET("notebooks/:id", s.getLegacyNotebook)
	auth.PUT("notebooks/:id", s.putLegacyNotebook)
	auth.DELETE("notebooks/:id", s.deleteLegacyNotebook)
	// ... and its kernels.
	auth.GET("clusters", s.listClusters)
	auth.GET("clusters/:id", s.getCluster)
	auth.POST("clusters/:id/:action", s.clusterAction)
	auth.GET("kernels", s.listLegacyKernels)
	auth.POST("kernels", s.startLegacyKernel)
	auth.GET("kernels/:id", s.getLegacyKernel)
	auth.DELETE("kernels/:id", s.deleteLegacyKernel)
	auth.GET("kernels/:id/:action", s.legacyKernelAction)
	auth.POST("kernels/:id/:action", s.legacyKernelAction)
	return e
}
