package jupyter

// Exporter is an entry of GET /api/nbconvert.
type Exporter struct {
	OutputMimetype string `json:"output_mimetype"`
}
