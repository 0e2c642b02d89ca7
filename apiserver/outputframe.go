package apiserver

import (
	"bytes"
	_ "embed"
	"html/template"
	"net/http"

	"github.com/gin-gonic/gin"
)

// The output frame: the document in which the notebook page runs an output that needs
// JavaScript (HTML with scripts, application/javascript, a Plotly figure), one frame per
// output (web/src/render/frame.ts). It is the same for everyone and tells nothing, so it needs
// no login; the page posts the output into it.
//
// Its policy is its own, unlike a srcdoc frame's, which would inherit the page's (no inline
// scripts at all):
//   - sandbox allow-scripts, never allow-same-origin: the document's origin is opaque, whoever
//     frames it, so its scripts read no cookie or storage of nbkube's origin, no page's DOM,
//     and what they send carries Origin: null, which authenticate refuses;
//   - inline scripts and eval run there (outputs are inline scripts; their libraries use eval),
//     and scripts, styles, fonts, images and connections from https: sites, where Bokeh,
//     folium (Leaflet) and Plotly's "cdn" HTML load their libraries and tiles from; and this
//     server's scripts ('self', the document's URL's origin), for the frame's own and plotly.js;
//   - no forms, no base URL, framed only by nbkube's own pages.

//go:embed pages/outputframe.html
var outputFrameHTML string

var outputFrameTemplate = template.Must(template.New("outputframe").Parse(outputFrameHTML))

// outputFrameCSP is the output frame's Content-Security-Policy.
const outputFrameCSP = "sandbox allow-scripts; default-src 'none'; " +
	"script-src 'self' 'unsafe-inline' 'unsafe-eval' https:; style-src 'self' 'unsafe-inline' https:; " +
	"img-src 'self' data: blob: https:; font-src 'self' data: https:; media-src data: blob: https:; " +
	"connect-src https: wss:; frame-src data: blob: https:; worker-src blob:; " +
	"form-action 'none'; base-uri 'none'; frame-ancestors 'self'"

// outputFramePath is the frame's address under the base URL.
const outputFramePath = "output-frame"

// getOutputFrame is GET /output-frame: the document of an output's frame.
func (s *Server) getOutputFrame(c *gin.Context) {
	var buf bytes.Buffer
	if err := outputFrameTemplate.Execute(&buf, s.opts.BaseURL+assetsPath); err != nil {
		s.abortErr(c, err)
		return
	}
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", outputFrameCSP)
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "text/html; charset=utf-8", buf.Bytes())
}
