package pytext

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitLines_IsPythonSplitlinesKeepends(t *testing.T) {
	for in, want := range map[string][]string{
		"":              nil,
		"a":             {"a"},
		"a\n":           {"a\n"},
		"a\r\nb\rc\n\n": {"a\r\n", "b\r", "c\n", "\n"},
		"a\u2028b\x0cc": {"a\u2028", "b\x0c", "c"},
		"a\u0085b\x1ec": {"a\u0085", "b\x1e", "c"},
	} {
		if d := cmp.Diff(want, SplitLines(in)); d != "" {
			t.Errorf("SplitLines(%q) (-want +got):\n%s", in, d)
		}
	}
}
