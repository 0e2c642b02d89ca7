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
	// limitBody comes before anything that may answer, so that no answer waits for a body.
	e.Use(s.measureRequests, s.recoverPanics, s.logRequests, s.limitBody, s.securityHeaders, s.stripTrailingSlash)
	e.NoRoute(s.noRoute)
	e.NoMethod(func(c *gin.Context) { s.abortErr(c, errMethodNotAllowed) })
	h := s.handle

	base := e.Group(s.opts.BaseURL)
	// Unauthenticated, and telling as little as possible.
	base.GET("api", s.getAPIVersion)
	base.GET("login", s.getLogin)
	base.POST("login", s.postLogin)
	base.GET("logout", s.getLogout)
	base.GET("oauth_callback", s.finishBrowserLogin)
	// Another replica, which proves it has the installation's key instead of a user.
	base.GET(peerEventsPath, s.handle(s.streamPeerEvents))

	// Bodies are admitted by bytes once their sender is known (admission.go): an
	// unauthenticated client cannot hold the budget.
	auth := base.Group("", s.authenticate, s.admitBodies)
	// Routes that reach the contents see the user's home (openContents).
	home := auth.Group("", s.openContents)
	// The web pages (pages.go). A browser that is not logged in goes to the login page first;
	// the ?token= of the printed URL logs it in on the way. "/" is the dashboard for a browser
	// and, as before the pages, a redirect to the root listing for an API client; the other
	// page routes serve only requests that accept HTML.
	base.GET(assetsPath+"*file", s.getAsset)
	base.GET(faviconPath, s.getFavicon)
	base.HEAD(faviconPath, s.getFavicon)
	base.GET(outputFramePath, s.getOutputFrame)
	base.GET("", s.loginFirst, s.authenticate, s.openContents, s.getRoot)
	pages := base.Group("", s.pagesOnly, s.loginFirst, s.authenticate, s.openContents)
	pages.GET("tree", s.page(s.getTree))
	pages.GET("tree/*path", s.page(s.getTree))
	pages.GET("new", s.sameSiteNavigation, s.page(s.getNew))
	pages.GET("edit/*path", s.page(s.getEdit))
	pages.GET("view/*path", s.page(s.getView))
	// The terminal's page; the WebSocket /terminals/websocket/<name> is an API route beside it.
	pages.GET("terminals/:name", s.getTerminalPage)
	byID := base.Group("", s.notebookIDsOnly, s.pagesOnly, s.loginFirst, s.authenticate, s.openContents)
	byID.GET(":id", s.page(s.getNotebookPage))
	byID.GET(":id/copy", s.sameSiteNavigation, s.page(s.getCopyPage))
	byID.GET(":id/print", s.page(s.getPrintPage))
	auth.GET("api/spec.yaml", s.getSpec)
	auth.GET("metrics", s.serveMetrics())
	auth.GET("api/status", h(s.getStatus))
	auth.GET("api/me", h(s.getMe))
	auth.GET("api/nbconvert", s.getNbconvert)
	auth.GET("api/kernelspecs", h(s.getKernelSpecs))
	auth.GET("api/kernelspecs/:name", h(s.getKernelSpec))
	auth.GET("kernelspecs/:name/*file", h(s.getKernelSpecResource))
	auth.HEAD("kernelspecs/:name/*file", h(s.getKernelSpecResource))
	auth.GET("api/kernels", h(s.listKernels))
	auth.POST("api/kernels", h(s.startKernel))
	auth.GET("api/kernels/:id", h(s.getKernel))
	auth.DELETE("api/kernels/:id", h(s.deleteKernel))
	auth.POST("api/kernels/:id/:action", h(s.kernelAction))
	home.POST("api/kernels/:id/execute", h(s.executeCells))
	auth.GET("api/kernels/:id/channels", h(s.kernelChannels))
	auth.POST("api/events", h(s.postEvent))
	auth.GET("api/events/subscribe", h(s.subscribeEvents))
	auth.GET("api/clusters", h(s.listClusters))
	auth.POST("api/clusters", h(s.createCluster))
	auth.GET("api/clusters/:id", h(s.getCluster))
	auth.DELETE("api/clusters/:id", h(s.deleteCluster))
	auth.POST("api/clusters/:id/:action", h(s.clusterAction))
	auth.GET("dask/:id/*path", h(s.daskDashboard))
	// Terminals (terminals.go); without them, nothing is there.
	terminals := auth.Group("", s.terminalsOn)
	terminals.GET("api/terminals", h(s.listTerminals))
	terminals.POST("api/terminals", s.openContents, h(s.startTerminal))
	terminals.GET("api/terminals/:name", h(s.getTerminal))
	terminals.DELETE("api/terminals/:name", h(s.deleteTerminal))
	terminals.GET(terminalSocketRoute, h(s.terminalSocket))
	auth.GET("api/sessions", h(s.listSessions))
	auth.POST("api/sessions", h(s.createSession))
	auth.GET("api/sessions/:id", h(s.getSession))
	auth.PATCH("api/sessions/:id", h(s.updateSession))
	auth.DELETE("api/sessions/:id", h(s.deleteSession))
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodPost, http.MethodDelete} {
		auth.Handle(m, "api/notebooks", s.redirectNotebooks)
		auth.Handle(m, "api/notebooks/*path", s.redirectNotebooks)
		home.Handle(m, "api/contents", s.countContents, h(s.contents))
		home.Handle(m, "api/contents/*path", s.countContents, h(s.contents))
	}
	home.GET("api/trash", h(s.listTrash))
	home.DELETE("api/trash", h(s.emptyTrash))
	home.DELETE("api/trash/:id", h(s.deleteTrash))
	home.POST("api/trash/:id/restore", h(s.restoreTrash))
	home.GET("api/fileid/id", h(s.getFileID))
	home.GET("api/fileid/path", h(s.getFilePath))
	home.GET("files/*path", h(s.getFile))
	home.HEAD("files/*path", h(s.getFile))
	home.GET("nbconvert/:format/*path", h(s.exportFile))
	auth.POST("nbconvert/:format", h(s.exportModel))

	// The older IPython interface: notebooks by id in a flat root.
	home.GET("notebooks", h(s.listLegacyNotebooks))
	home.POST("notebooks", h(s.newLegacyNotebook))
	// A browser's /notebooks/<path> is Notebook 6's address of a notebook (pages.go).
	base.GET("notebooks/:id", s.notebook6Address, s.authenticate, s.admitBodies, s.openContents, h(s.getLegacyNotebook))
	home.PUT("notebooks/:id", h(s.putLegacyNotebook))
	home.DELETE("notebooks/:id", h(s.deleteLegacyNotebook))
	// ... and its kernels.
	auth.GET("clusters", h(s.listClusters))
	auth.GET("clusters/:id", h(s.getCluster))
	auth.POST("clusters/:id/:action", h(s.clusterAction))
	auth.GET("kernels", h(s.listLegacyKernels))
	home.POST("kernels", h(s.startLegacyKernel))
	auth.GET("kernels/:id", h(s.getLegacyKernel))
	auth.DELETE("kernels/:id", h(s.deleteKernel))
	auth.GET("kernels/:id/:action", h(s.legacyKernelAction))
	auth.POST("kernels/:id/:action", h(s.legacyKernelAction))
	// ... and its reStructuredText service.
	auth.POST("rstservice/render", h(s.renderRST))
	return e
}
