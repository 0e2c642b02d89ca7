package nbconvert

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/nbkube/nbkube/internal/nbformat"
)

// notebook is the part of an nbformat 4 notebook the exporters read.
type notebook struct {
	Cells    []cell     `json:"cells"`
	Metadata nbMetadata `json:"metadata"`
	Nbformat int        `json:"nbformat"`
}

type nbMetadata struct {
	LanguageInfo languageInfo `json:"language_info"`
	Title        string       `json:"title"`
	Authors      []struct {
		Name string `json:"name"`
	} `json:"authors"`
}

type languageInfo struct {
	Name              string `json:"name"`
	FileExtension     string `json:"file_extension"`
	Mimetype          string `json:"mimetype"`
	PygmentsLexer     string `json:"pygments_lexer"`
	NbconvertExporter string `json:"nbconvert_exporter"`
}

type cell struct {
	CellType       string                `json:"cell_type"`
	Source         multiline             `json:"source"`
	Metadata       cellMetadata          `json:"metadata"`
	Outputs        []output              `json:"outputs"`
	ExecutionCount *int                  `json:"execution_count"`
	Attachments    map[string]mimeBundle `json:"attachments"`
}

type cellMetadata struct {
	RawMimetype    string   `json:"raw_mimetype"`
	MagicsLanguage string   `json:"magics_language"`
	Tags           []string `json:"tags"`
}

type output struct {
	OutputType string                     `json:"output_type"`
	Name       string                     `json:"name"`
	Text       multiline                  `json:"text"`
	Data       mimeBundle                 `json:"data"`
	Metadata   map[string]json.RawMessage `json:"metadata"`
	Ename      string                     `json:"ename"`
	Evalue     string                     `json:"evalue"`
	Traceback  []string                   `json:"traceback"`
}

// mimeBundle maps MIME types to their data: text as nbformat stores it (a string or a list of
// lines), JSON types as their JSON.
type mimeBundle map[string]json.RawMessage

// multiline is a multi-line string that nbformat stores either whole or as a list of lines.
type multiline = nbformat.Multiline

// str is the data of mime as text: a string, a list of lines, or any other JSON as written.
func (b mimeBundle) str(mime string) string {
	raw, ok := b[mime]
	if !ok {
		return ""
	}
	var t multiline
	if err := t.UnmarshalJSON(raw); err == nil {
		return string(t)
	}
	return string(raw)
}

// metaString is a string entry of an output's metadata for a MIME type, as nbconvert's
// get_metadata reads it: metadata[mime][key], else metadata[key].
func (o *output) metaValue(key, mime string) (json.RawMessage, bool) {
	if per, ok := o.Metadata[mime]; ok {
		var m map[string]json.RawMessage
		if json.Unmarshal(per, &m) == nil {
			if v, ok := m[key]; ok {
				return v, true
			}
		}
	}
	v, ok := o.Metadata[key]
	return v, ok
}

// metaScalar renders a metadata value as nbconvert's templates print it: numbers and strings
// as written, anything else absent.
func (o *output) metaScalar(key, mime string) (string, bool) {
	v, ok := o.metaValue(key, mime)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, true
	}
	var n json.Number
	if json.Unmarshal(v, &n) == nil {
		return n.String(), true
	}
	return "", false
}

func (o *output) metaTrue(key, mime string) bool {
	v, ok := o.metaValue(key, mime)
	if !ok {
		return false
	}
	var b bool
	return json.Unmarshal(v, &b) == nil && b
}

// ErrUnreadable wraps the failures to read a notebook: not JSON, or not nbformat 4.
var ErrUnreadable = errors.New("unreadable notebook")

// decode reads a notebook and applies what every nbconvert exporter applies before its
// template: consecutive stream outputs of one name merged, and carriage-return overwrites
// resolved (nbconvert's coalesce_streams).
func decode(data []byte) (*notebook, error) {
	var nb notebook
	if err := json.Unmarshal(data, &nb); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if nb.Nbformat != 4 {
		return nil, fmt.Errorf("%w: nbformat %d is not supported, only 4", ErrUnreadable, nb.Nbformat)
	}
	for i := range nb.Cells {
		c := &nb.Cells[i]
		c.Outputs = coalesceStreams(c.Outputs)
		if c.CellType == "code" && c.Metadata.MagicsLanguage == "" {
			if m := magicLanguage.FindStringSubmatch(string(c.Source)); m != nil {
				c.Metadata.MagicsLanguage = magicLanguages[m[1]]
			}
		}
	}
	return &nb, nil
}

// magicLanguages are the languages of the cell magics that nbconvert highlights in their own
// language (its HighlightMagicsPreprocessor).
var magicLanguages = map[string]string{
	"R": "r", "bash": "bash", "cython": "cython", "javascript": "javascript", "julia": "julia",
	"latex": "latex", "octave": "octave", "perl": "perl", "ruby": "ruby", "sh": "sh", "sql": "sql",
}

var magicLanguage = regexp.MustCompile(`^\s*%%(R|bash|cython|javascript|julia|latex|octave|perl|ruby|sh|sql)\s`)

// crOverwrite matches a line's text that a carriage return overwrites: everything up to the
// last \r that is not the end of the line.
var crOverwrite = regexp.MustCompile(`.*\r([^\n])`)

func coalesceStreams(outs []output) []output {
	if len(outs) == 0 {
		return outs
	}
	merged := outs[:1]
	for _, o := range outs[1:] {
		last := &merged[len(merged)-1]
		if o.OutputType == "stream" && last.OutputType == "stream" && o.Name == last.Name {
			last.Text += o.Text
			continue
		}
		merged = append(merged, o)
	}
	for i := range merged {
		if merged[i].OutputType == "stream" && strings.Contains(string(merged[i].Text), "\r") {
			merged[i].Text = multiline(resolveCR(string(merged[i].Text)))
		}
	}
	return merged
}

// resolveCR drops what a \r followed by more text on the same line overwrites, as nbconvert's
// `.*\r(?=[^\n])` substitution does (Go's regexp has no look-ahead: the character after the
// \r is matched and put back).
func resolveCR(s string) string {
	return crOverwrite.ReplaceAllString(s, "$1")
}

// priority is an exporter's order of preference among the representations of an output.
type priority []string

// pick is the representation an output is shown in: the first of p it has, as nbconvert's
// filter_data_type picks.
func (p priority) pick(b mimeBundle) string {
	for _, m := range p {
		if _, ok := b[m]; ok {
			return m
		}
	}
	return ""
}

// executionCount is how nbconvert's templates print a prompt number: " " when unset.
func (c *cell) executionCount() string {
	if c.ExecutionCount == nil {
		return " "
	}
	return fmt.Sprint(*c.ExecutionCount)
}

// includesRaw tells whether a raw cell is part of an export whose raw formats are formats.
func (c *cell) includesRaw(formats ...string) bool {
	f := strings.ToLower(c.Metadata.RawMimetype)
	for _, x := range formats {
		if f == x {
			return true
		}
	}
	return false
}

// lexerName is the highlighting language of the notebook's code, as nbconvert chooses it.
func (nb *notebook) lexerName() string {
	if l := nb.Metadata.LanguageInfo.PygmentsLexer; l != "" {
		return l
	}
	return nb.Metadata.LanguageInfo.Name
}
