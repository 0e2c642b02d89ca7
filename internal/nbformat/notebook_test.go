package nbformat

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLinesOf_IsPythonSplitlinesKeepends(t *testing.T) {
	for in, want := range map[string][]any{
		"":              {},
		"a":             {"a"},
		"a\n":           {"a\n"},
		"a\r\nb\rc\n\n": {"a\r\n", "b\r", "c\n", "\n"},
		"a\u2028b\x0cc": {"a\u2028", "b\x0c", "c"},
	} {
		if d := cmp.Diff(want, linesOf(in)); d != "" {
			t.Errorf("linesOf(%q) (-want +got):\n%s", in, d)
		}
	}
}
