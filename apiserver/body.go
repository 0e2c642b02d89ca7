package apiserver

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// errInvalidJSON is Jupyter's answer to a body that is not JSON (get_json_body).
var errInvalidJSON = domainerr.Invalid("Invalid JSON in body of request")

// readJSON decodes the request body into v. An empty body is not an error: v is left as it
// is, as Jupyter's get_json_body returns None.
func readJSON(c *gin.Context, v any) error {
	body, present, err := readJSONBody(c)
	if err != nil || !present {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return errInvalidJSON
	}
	return nil
}

// readJSONRaw reads a JSON body as is, checking only that it is JSON; false when empty.
func readJSONRaw(c *gin.Context, raw *json.RawMessage) (bool, error) {
	body, present, err := readJSONBody(c)
	if err != nil || !present {
		return false, err
	}
	if !json.Valid(body) {
		return false, errInvalidJSON
	}
	*raw = body
	return true, nil
}

// readSaveModel is readJSON of a contents model, whose content stays the body's text (see
// jupyter.DecodeSaveModel).
func readSaveModel(c *gin.Context, m *jupyter.SaveModel) (bool, error) {
	body, present, err := readJSONBody(c)
	if err != nil || !present {
		return false, err
	}
	if err := jupyter.DecodeSaveModel(body, m); err != nil {
		return false, errInvalidJSON
	}
	return true, nil
}

// readJSONBody reads the body and tells whether it has anything but white space.
func readJSONBody(c *gin.Context) ([]byte, bool, error) {
	body, err := readBody(c)
	if err != nil {
		return nil, false, err
	}
	return body, len(bytes.TrimSpace(body)) > 0, nil
}

// readBody reads the request body into a buffer of its declared length, when it has one
// (the body admission bounded it), rather than one grown by doubling: a 5 MB save copied
// itself about twice over and left the copies to the collector.
func readBody(c *gin.Context) ([]byte, error) {
	n := c.Request.ContentLength
	if n <= 0 || n > 1<<30 {
		return io.ReadAll(c.Request.Body)
	}
	// Not bytes.Buffer.ReadFrom, which keeps 512 bytes free and so doubles a buffer of the
	// exact size at its last read. net/http ends the body at its declared length.
	buf := make([]byte, n)
	if _, err := io.ReadFull(c.Request.Body, buf); err != nil {
		return nil, err
	}
	return buf, nil
}
