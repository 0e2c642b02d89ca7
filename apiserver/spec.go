package apiserver

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// specYAML is the OpenAPI description of the API this server serves; spec_test.go keeps it
// to the routes and checks the server's answers against it.
//
//go:embed spec.yaml
var specYAML []byte

// specETag tags the description for conditional requests, as Jupyter's static handler does.
var specETag = func() string {
	sum := sha256.Sum256(specYAML)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}()

// getSpec is GET /api/spec.yaml: the description as is, as text/x-yaml like Jupyter Server's
// APISpecHandler.
func (s *Server) getSpec(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Type", "text/x-yaml")
	h.Set("Etag", specETag)
	http.ServeContent(c.Writer, c.Request, "spec.yaml", time.Time{}, bytes.NewReader(specYAML))
}
