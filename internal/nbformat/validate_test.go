package nbformat

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Large notebooks are validated cell by cell in parallel; the verdict and the message must be
// those of one pass over the whole notebook.
func TestValidateNotebook_ParallelCellsAgreeWithOnePass(t *testing.T) {
	cell := func(i int) map[string]any {
		return map[string]any{"cell_type": "markdown", "id": fmt.Sprintf("c%d", i), "metadata": map[string]any{}, "source": "x"}
	}
	all, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []int{-1, 0, 17, 39} {
		cells := make([]any, 40)
		for i := range cells {
			cells[i] = cell(i)
		}
		if bad >= 0 {
			c := cell(bad)
			c["cell_type"] = "code" // a code cell without outputs and execution_count
			cells[bad] = c
		}
		nb := map[string]any{"cells": cells, "metadata": map[string]any{}, "nbformat": json.Number("4"), "nbformat_minor": json.Number("5")}
		got, err := validateNotebook(nb)
		if err != nil {
			t.Fatal(err)
		}
		want, err := validationMessage(all.current.whole.Validate(any(nb)), nb, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("bad cell %d: parallel %q, one pass %q", bad, got, want)
		}
		if (bad >= 0) != (got != "") || (bad >= 0 && !strings.Contains(got, fmt.Sprintf("at /cells/%d:", bad))) {
			t.Errorf("bad cell %d: message %q", bad, got)
		}
	}
}
