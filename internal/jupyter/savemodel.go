package jupyter

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/nbkube/nbkube/internal/jsonspan"
)

// saveModelMaxDepth bounds the nesting of a save's body: a notebook's content nests a dozen
// levels at most (outputs' JSON data deeper), far below this.
const saveModelMaxDepth = 1000

// ErrInvalidSaveModel is DecodeSaveModel's error for a body that is not JSON or not a model.
var ErrInvalidSaveModel = errors.New("invalid JSON in body of request")

// DecodeSaveModel decodes the body of a contents request (PUT, POST or PATCH) into m. The
// content is the body's own text, not a copy: a notebook of plots is megabytes of JSON that
// the store reads as text, and encoding/json's unmarshalling of it into a json.RawMessage
// scanned it twice and copied it, most of a large save's time. The body is validated once
// (jsonspan), and must not change while m is used. Keys are matched exactly, as Jupyter's
// json.loads does; a key given twice takes its last value; null leaves a field unset, as
// for encoding/json, except the content, which is then the text null. A body of null is an
// empty model.
func DecodeSaveModel(body []byte, m *SaveModel) error {
	if string(bytes.TrimSpace(body)) == "null" {
		return nil
	}
	doc, members, err := jsonspan.ParseObject(body, saveModelMaxDepth)
	if err != nil {
		return errors.Join(ErrInvalidSaveModel, err)
	}
	str := func(key string, dst *string) error {
		s, ok := jsonspan.Last(members, key)
		if !ok || string(doc.Text(s)) == "null" {
			return nil
		}
		v, ok := doc.StringValue(s)
		if !ok {
			return ErrInvalidSaveModel
		}
		*dst = v
		return nil
	}
	for key, dst := range map[string]*string{"name": &m.Name, "path": &m.Path, "type": &m.Type, "format": &m.Format, "copy_from": &m.CopyFrom, "ext": &m.Ext} {
		if err := str(key, dst); err != nil {
			return err
		}
	}
	if s, ok := jsonspan.Last(members, "content"); ok {
		m.Content = json.RawMessage(doc.Text(s))
	}
	if s, ok := jsonspan.Last(members, "chunk"); ok && string(doc.Text(s)) != "null" {
		n, err := strconv.Atoi(string(doc.Text(s)))
		if err != nil {
			return ErrInvalidSaveModel
		}
		m.Chunk = &n
	}
	return nil
}
