package nbformat

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Multiline is a multi-line string that nbformat stores either whole or as a list of lines
// (sources, stream texts, text outputs); decoded, it is the one string.
type Multiline string

func (t *Multiline) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var lines []string
		if err := json.Unmarshal(b, &lines); err != nil {
			return err
		}
		*t = Multiline(strings.Join(lines, ""))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*t = Multiline(s)
	return nil
}
