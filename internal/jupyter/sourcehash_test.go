package jupyter

import "testing"

func TestSourceHash_IsMurmurHash2OfTheUTF8Bytes(t *testing.T) {
	for _, tc := range []struct{ source, want string }{
		// jupyter-server-documents' own example.
		{"1 + 1", "3531899427"},
		// MurmurHash2 with seed 0 of nothing is 0.
		{"", "0"},
		// The page's hash (npm murmurhash's v2 on the UTF-8 bytes) of the same source.
		{"print('héllo wörld ✓')", "1686570399"},
	} {
		if got := SourceHash(tc.source); got != tc.want {
			t.Errorf("SourceHash(%q) = %s, want %s", tc.source, got, tc.want)
		}
	}
	// Every tail length is mixed in: sources that differ in their last byte differ.
	seen := map[string]string{}
	for _, s := range []string{"a", "b", "ab", "ac", "abc", "abd", "abcd", "abce", "é", "ü"} {
		h := SourceHash(s)
		if other, ok := seen[h]; ok {
			t.Errorf("%q and %q hash alike (%s)", s, other, h)
		}
		seen[h] = s
	}
}
