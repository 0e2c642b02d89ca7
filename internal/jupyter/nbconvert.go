package jupyter

// Exporter is an entry of GET /api/nbconvert.
type Exporter struct {
	OutputMimetype string `json:"output_mimetype"`
}

// Exporters are the nbconvert formats nbkube lists, with nbconvert's output MIME types.
var Exporters = map[string]Exporter{
	"asciidoc": {"text/asciidoc"},
	"html":     {"text/html"},
	"latex":    {"text/latex"},
	"markdown": {"text/markdown"},
	"notebook": {"application/json"},
	"python":   {"text/x-python"},
	"rst":      {"text/restructuredtext"},
	"script":   {"text/plain"},
	"slides":   {"text/html"},
}
