package apiserver

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

// The sub-routes of a contents path, matched before the path itself as Jupyter Server does
// (so a file named "checkpoints" is addressed by its directory's checkpoints, there too).
var (
	checkpointsRoute = regexp.MustCompile(`^(?:(.*)/)?checkpoints(?:/([\w-]+))?$`)
	trustRoute       = regexp.MustCompile(`^(?:(.*)/)?trust$`)
)

// apiPath is the contents path of the request: no leading or trailing slash.
func apiPath(c *gin.Context) string { return strings.Trim(c.Param("path"), "/") }

// quote renders a path as Python's repr does in Jupyter's messages.
func quote(p string) string { return "'" + p + "'" }

// requestPath is the contents path as Jupyter's handler receives it from its route, which its
// refusals of hidden paths quote: decoded, with a leading slash ("" for the root).
func requestPath(c *gin.Context) string {
	if p := apiPath(c); p != "" {
		return "/" + p
	}
	if c.Param("path") != "" {
		return "/"
	}
	return ""
}

// contents is /api/contents/<path>: a file, notebook or directory, or the checkpoints or
// trust of one.
func (s *Server) contents(c *gin.Context) error {
	p := apiPath(c)
	if m := checkpointsRoute.FindStringSubmatch(p); m != nil {
		return s.checkpoints(c, m[1], m[2])
	}
	if m := trustRoute.FindStringSubmatch(p); m != nil {
		return s.trust(c, m[1])
	}
	switch c.Request.Method {
	case http.MethodGet:
		return s.getContents(c, p)
	case http.MethodPatch:
		return s.patchContents(c, p)
	case http.MethodPost:
		return s.postContents(c, p)
	case http.MethodPut:
		return s.putContents(c, p)
	case http.MethodDelete:
		return s.deleteContents(c, p)
	}
	return errMethodNotAllowed
}

func boolQuery(c *gin.Context, name, def string) (bool, error) {
	v := c.DefaultQuery(name, def)
	switch v {
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, domainerr.Invalid("%s %s is invalid", strings.ToUpper(name[:1])+name[1:], quote(v))
}

func (s *Server) getContents(c *gin.Context, p string) error {
	typ := c.Query("type")
	switch typ {
	case "", jupyter.TypeDirectory, jupyter.TypeFile, jupyter.TypeNotebook:
	default:
		return domainerr.Invalid("Type %s is invalid", quote(typ))
	}
	format := c.Query("format")
	switch format {
	case "", jupyter.FormatText, jupyter.FormatBase64:
	default:
		return domainerr.Invalid("Format %s is invalid", quote(format))
	}
	content, err := boolQuery(c, "content", "1")
	if err != nil {
		return err
	}
	hash, err := boolQuery(c, "hash", "0")
	if err != nil {
		return err
	}
	if s.hidden(p) {
		return domainerr.NotFound("file or directory %s does not exist", quote(requestPath(c)))
	}
	m, release, err := s.store(c.Request.Context()).GetStream(c.Request.Context(), p, contents.GetOptions{Type: typ, Format: format, Content: content, Hash: hash})
	if err != nil {
		return err
	}
	defer release()
	s.emitContents(c, "get", m.Path, "")
	return s.writeModel(c, http.StatusOK, m, false)
}

func (s *Server) patchContents(c *gin.Context, p string) error {
	var body jupyter.SaveModel
	present, err := readSaveModel(c, &body)
	if err != nil {
		return err
	}
	if !present {
		return domainerr.Invalid("JSON body missing")
	}
	if body.Path != "" && (s.hidden(p) || s.hidden(body.Path)) {
		return domainerr.Invalid("Cannot rename file or directory %s", quote(requestPath(c)))
	}
	ctx := c.Request.Context()
	if body.Path != "" && strings.Trim(body.Path, "/") != p {
		// The rename's own model: once the file has moved, a failing second look (a link
		// whose target the store does not serve) must not answer that nothing happened.
		m, err := s.store(ctx).Rename(ctx, p, strings.Trim(body.Path, "/"))
		if err != nil {
			return err
		}
		s.emitContents(c, "rename", m.Path, p)
		return s.writeModel(c, http.StatusOK, m, true)
	}
	m, err := s.store(ctx).Get(ctx, p, contents.GetOptions{})
	if err != nil {
		return err
	}
	return s.writeModel(c, http.StatusOK, m, true)
}

func (s *Server) postContents(c *gin.Context, p string) error {
	ctx := c.Request.Context()
	// The store refuses to look at a hidden path; the refusals below answer for it.
	if !s.hidden(p) {
		isFile, _, err := s.store(ctx).Exists(ctx, p)
		if err != nil {
			return err
		}
		if isFile {
			return domainerr.Invalid("Cannot POST to files, use PUT instead.")
		}
	}
	var body jupyter.SaveModel
	if _, err := readSaveModel(c, &body); err != nil {
		return err
	}
	var (
		m   *jupyter.ContentsModel
		err error
	)
	if body.CopyFrom != "" {
		if s.hidden(p) || s.hidden(body.CopyFrom) {
			return domainerr.Invalid("Cannot copy file or directory %s", quote(requestPath(c)))
		}
		m, err = s.store(ctx).Copy(ctx, strings.Trim(body.CopyFrom, "/"), p)
	} else {
		m, err = s.store(ctx).NewUntitled(ctx, p, body.Type, body.Ext)
	}
	if err != nil {
		return err
	}
	if body.CopyFrom != "" {
		s.emitContents(c, "copy", m.Path, strings.Trim(body.CopyFrom, "/"))
	} else {
		s.emitContents(c, "create", m.Path, "")
	}
	return s.writeModel(c, http.StatusCreated, m, true)
}

func (s *Server) putContents(c *gin.Context, p string) error {
	ctx := c.Request.Context()
	pre, err := precondition(c.Request.Header)
	if err != nil {
		return err
	}
	var body jupyter.SaveModel
	present, err := readSaveModel(c, &body)
	if err != nil {
		return err
	}
	if !present {
		if !pre.IsZero() {
			return domainerr.Invalid("A conditional save needs a model to save")
		}
		m, err := s.store(ctx).NewUntitled(ctx, p, "", "")
		if err != nil {
			return err
		}
		s.emitContents(c, "create", m.Path, "")
		return s.writeModel(c, http.StatusCreated, m, true)
	}
	if body.CopyFrom != "" {
		return domainerr.Invalid("Cannot copy with PUT, only POST")
	}
	if (body.Path != "" && s.hidden(body.Path)) || s.hidden(p) {
		return domainerr.Invalid("Cannot create file or directory %s", quote(requestPath(c)))
	}
	isFile, isDir, err := s.store(ctx).Exists(ctx, p)
	if err != nil {
		return err
	}
	store := s.store(ctx)
	if body.Chunk != nil && s.opts.Quotas != nil {
		// A chunk of an upload: the user's uploads in progress are bounded by their allowance.
		allowance, err := s.opts.Quotas.UploadAllowance(ctx, *userOf(c))
		if err != nil {
			return err
		}
		store = store.ForUploader(userOf(c).Name, allowance)
	}
	m, err := store.SaveIf(ctx, p, &body, pre)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if isFile || isDir {
		status = http.StatusOK
	}
	// As Jupyter Server names them: a save of what exists, an upload of what is new.
	if status == http.StatusOK {
		s.emitContents(c, "save", m.Path, "")
	} else {
		s.emitContents(c, "upload", m.Path, "")
	}
	return s.writeModel(c, status, m, true)
}

// precondition is the precondition of a conditional save, from HTTP's If-Match and
// If-Unmodified-Since headers; none without them. Jupyter has neither, and its clients send
// neither, so their saves stay unconditional. The version a client loaded is named by
// headers only, not by the last_modified of the model in the body: clients that send back a
// whole model they loaded long ago (and Jupyter ignores that field) would find their saves
// refused. Malformed values are refused rather than ignored, as HTTP would ignore them,
// since ignoring one would save unconditionally what the client meant to save only if the
// file had not changed.
func precondition(h http.Header) (contents.Precondition, error) {
	var pre contents.Precondition
	if v := h.Values("If-Match"); len(v) > 0 {
		tags, ok := parseETags(strings.Join(v, ","))
		if !ok {
			return pre, domainerr.Invalid("Invalid If-Match header: %s", quote(strings.Join(v, ", ")))
		}
		pre.IfMatch = tags
	}
	if v := h.Get("If-Unmodified-Since"); v != "" {
		t, err := http.ParseTime(v)
		if err != nil {
			return pre, domainerr.Invalid("Invalid If-Unmodified-Since header: %s", quote(v))
		}
		pre.IfUnmodifiedSince = t
	}
	return pre, nil
}

// parseETags splits an If-Match value, "*" or a list of entity tags (RFC 9110's
// #entity-tag: quoted, perhaps W/-prefixed, separated by commas); false when malformed or
// empty. The tags keep their quotes and W/ prefix, so that a weak tag never matches.
func parseETags(v string) ([]string, bool) {
	if strings.TrimSpace(v) == "*" {
		return []string{"*"}, true
	}
	var tags []string
	for {
		v = strings.TrimLeft(v, " \t,")
		if v == "" {
			return tags, tags != nil
		}
		start := 0
		if strings.HasPrefix(v, "W/") {
			start = 2
		}
		if len(v) < start+2 || v[start] != '"' {
			return nil, false
		}
		end := strings.IndexByte(v[start+1:], '"')
		if end < 0 {
			return nil, false
		}
		n := start + 1 + end + 1
		tags = append(tags, v[:n])
		v = v[n:]
		if rest := strings.TrimLeft(v, " \t"); rest != "" && rest[0] != ',' {
			return nil, false
		}
	}
}

func (s *Server) deleteContents(c *gin.Context, p string) error {
	if s.hidden(p) {
		return domainerr.Invalid("Cannot delete file or directory %s", quote(requestPath(c)))
	}
	if err := s.store(c.Request.Context()).Delete(c.Request.Context(), userOf(c).Name, p); err != nil {
		return err
	}
	s.emitContents(c, "delete", strings.Trim(p, "/"), "")
	c.Status(http.StatusNoContent)
	return nil
}

// hidden is Jupyter's handler-level check: hidden paths are refused unless allowed.
func (s *Server) hidden(p string) bool {
	return s.opts.Contents.RefusesHidden(strings.Trim(p, "/"))
}

// rawPartsFrom is the size of a notebook's content from which writeModel writes it in parts:
// below it, one write of one body costs less than three.
const rawPartsFrom = 16 << 10

// writeModel answers with a contents model and Jupyter's headers. A large file's content
// (contents.Store.GetStream) is encoded as it is written; once the status is sent, an error
// can only cut the answer short.
func (s *Server) writeModel(c *gin.Context, status int, m *jupyter.ContentsModel, location bool) error {
	_, streamed := m.Content.(jupyter.StreamedContent)
	head, raw, tail, parts := m.RawParts()
	// A notebook's content is written as the store holds it (often kept from an earlier
	// read): copying it into one body would make megabytes of garbage per read of a notebook
	// of plots, and the collections that follow are what stalls other requests.
	parts = parts && len(raw) >= rawPartsFrom
	var body []byte
	if !streamed && !parts {
		var err error
		if body, err = m.AppendJSON(make([]byte, 0, 4096)); err != nil {
			return err
		}
	}
	if location {
		c.Header("Location", s.contentsURL(m.Path))
	}
	c.Header("Last-Modified", m.LastModified.UTC().Format(http.TimeFormat))
	if m.ETag != "" {
		// The version of a file or notebook the model describes: If-Match names it to save
		// only over it.
		c.Header("ETag", m.ETag)
	}
	if parts {
		c.Header("Content-Type", "application/json")
		c.Header("Content-Length", strconv.Itoa(len(head)+len(raw)+len(tail)))
		c.Status(status)
		for _, b := range [][]byte{head, raw, tail} {
			if _, err := c.Writer.Write(b); err != nil {
				break // the client went away: nothing more to say to it
			}
		}
		return nil
	}
	if !streamed {
		c.Data(status, "application/json", body)
		return nil
	}
	c.Header("Content-Type", "application/json")
	c.Status(status)
	if err := m.WriteJSON(c.Writer); err != nil {
		// A client gone away, or a file that failed or changed between the passes: the end of
		// a chunked answer must not be sent, so that the client sees it cut rather than a
		// model that is not the file's. net/http drops the connection on this panic.
		if c.Request.Context().Err() != nil {
			s.opts.Log.V(1).Info("Answer cut short", "method", c.Request.Method, "path", c.Request.URL.Path, "error", err.Error())
		} else {
			s.opts.Log.Error(err, "Answer cut short", "method", c.Request.Method, "path", c.Request.URL.Path)
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}

func (s *Server) contentsURL(p string) string {
	return s.opts.BaseURL + "api/contents" + escapePath(p, true)
}

// checkpoints is /api/contents/<path>/checkpoints[/<id>].
func (s *Server) checkpoints(c *gin.Context, p, id string) error {
	switch method := c.Request.Method; {
	case id == "" && method == http.MethodGet:
		return s.listCheckpoints(c, p)
	case id == "" && method == http.MethodPost:
		return s.createCheckpoint(c, p)
	case id != "" && method == http.MethodPost:
		return s.restoreCheckpoint(c, p, id)
	case id != "" && method == http.MethodDelete:
		return s.deleteCheckpoint(c, p, id)
	case id != "" && method == http.MethodGet:
		return s.getCheckpoint(c, p, id)
	}
	return errMethodNotAllowed
}

func (s *Server) listCheckpoints(c *gin.Context, p string) error {
	list, err := s.store(c.Request.Context()).ListCheckpoints(c.Request.Context(), p)
	if err != nil {
		return err
	}
	if list == nil {
		list = []jupyter.Checkpoint{}
	}
	c.JSON(http.StatusOK, list)
	return nil
}

func (s *Server) createCheckpoint(c *gin.Context, p string) error {
	cp, err := s.store(c.Request.Context()).CreateCheckpoint(c.Request.Context(), p)
	if err != nil {
		return err
	}
	c.Header("Location", s.contentsURL(p)+"/checkpoints/"+cp.ID)
	c.JSON(http.StatusCreated, cp)
	return nil
}

func (s *Server) restoreCheckpoint(c *gin.Context, p, id string) error {
	if err := s.store(c.Request.Context()).RestoreCheckpoint(c.Request.Context(), p, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

func (s *Server) deleteCheckpoint(c *gin.Context, p, id string) error {
	if err := s.store(c.Request.Context()).DeleteCheckpoint(c.Request.Context(), p, id); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// getCheckpoint goes beyond Jupyter: a checkpoint can be read without restoring it.
func (s *Server) getCheckpoint(c *gin.Context, p, id string) error {
	format := c.Query("format")
	if format != "" && format != jupyter.FormatText && format != jupyter.FormatBase64 {
		return domainerr.Invalid("Format %s is invalid", quote(format))
	}
	content, err := boolQuery(c, "content", "1")
	if err != nil {
		return err
	}
	m, err := s.store(c.Request.Context()).GetCheckpoint(c.Request.Context(), p, id, contents.GetOptions{Format: format, Content: content})
	if err != nil {
		return err
	}
	return s.writeModel(c, http.StatusOK, m, false)
}

// trust answers Jupyter's "trust this notebook" with 201 once the notebook exists: nbkube
// keeps no notebook signatures, clients decide what output to trust on their side.
func (s *Server) trust(c *gin.Context, p string) error {
	if c.Request.Method != http.MethodPost {
		return errMethodNotAllowed
	}
	isFile, _, err := s.store(c.Request.Context()).Exists(c.Request.Context(), p)
	if err != nil {
		return err
	}
	if !isFile {
		return domainerr.NotFound("No such file: %s", quote(p))
	}
	c.Status(http.StatusCreated)
	return nil
}
