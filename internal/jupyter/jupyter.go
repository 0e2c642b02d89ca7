// Package jupyter holds the JSON shapes of the Jupyter server REST API (as Jupyter Server's
// api.yaml and handlers define them), so that every handler and store speaks them the same
// way. It imports the standard library only.
package jupyter

import (
	"encoding/json"
	"time"
)

// Time is a timestamp as Jupyter writes them: ISO 8601 in UTC with microseconds and a "Z"
// (Python's isoformat of an aware UTC datetime).
type Time struct{ time.Time }

const timeLayout = "2006-01-02T15:04:05.000000Z"

// MarshalJSON writes the Jupyter format.
func (t Time) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.UTC().Format(timeLayout))
}

// UnmarshalJSON reads any RFC 3339 time.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

// Error is the body of every API error: {"message": ..., "reason": ...}.
type Error struct {
	Message string  `json:"message"`
	Reason  *string `json:"reason"`
}
