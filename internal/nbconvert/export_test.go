package nbconvert

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// bigNotebook is a notebook of n code cells, each with a long line of code and a long stream
// output.
func bigNotebook(n int) []byte {
	var cells []string
	for i := range n {
		cells = append(cells, fmt.Sprintf(`{"cell_type":"code","execution_count":%d,"metadata":{},"source":"print(%d)  # %s",
			"outputs":[{"output_type":"stream","name":"stdout","text":%q}]}`, i+1, i, strings.Repeat("y", 500), strings.Repeat("x", 1000)))
	}
	return []byte(`{"nbformat":4,"nbformat_minor":5,"metadata":{"language_info":{"name":"python"}},"cells":[` +
		strings.Join(cells, ",") + `]}`)
}

func TestExport_StopsAtItsOutputLimit(t *testing.T) {
	for _, format := range Formats() {
		t.Run(format, func(t *testing.T) {
			_, err := Export(context.Background(), format, bigNotebook(200), Options{Name: "big", MaxOutputBytes: 64 << 10})
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("export of a notebook larger than the limit: %v, want ErrTooLarge", err)
			}
		})
	}
}

func TestExport_StopsWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, format := range Formats() {
		t.Run(format, func(t *testing.T) {
			if _, err := Export(ctx, format, bigNotebook(200), Options{Name: "big"}); !errors.Is(err, context.Canceled) {
				t.Fatalf("export with an ended context: %v, want context.Canceled", err)
			}
		})
	}
}

func TestExport_UnknownFormatAndUnreadableNotebook(t *testing.T) {
	if _, err := Export(context.Background(), "pdf", bigNotebook(1), Options{}); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("pdf: %v, want ErrUnknownFormat", err)
	}
	for _, data := range []string{`not json`, `{"nbformat":3,"cells":[]}`} {
		if _, err := Export(context.Background(), "html", []byte(data), Options{}); !errors.Is(err, ErrUnreadable) {
			t.Errorf("%s: %v, want ErrUnreadable", data, err)
		}
	}
}

// nbconvert highlights code as IPython 3 when the notebook does not name its language.
func TestExport_HTMLHighlightsAsIPython3WhenTheNotebookSaysNothing(t *testing.T) {
	nb := `{"nbformat":4,"nbformat_minor":5,"metadata":{},"cells":[{"cell_type":"code","execution_count":1,"metadata":{},"source":"import math","outputs":[]}]}`
	r, err := Export(context.Background(), "html", []byte(nb), Options{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<div class=" highlight hl-ipython3">`, `<span class="kn">import</span>`} {
		if !strings.Contains(string(r.Body), want) {
			t.Errorf("HTML export lacks %s", want)
		}
	}
}
