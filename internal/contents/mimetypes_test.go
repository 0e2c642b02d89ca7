package contents

import "testing"

func TestGuessMimetype_FollowsPython(t *testing.T) {
	for name, want := range map[string]string{
		"a.png": "image/png", "A.PNG": "image/png", "a.csv.gz": "text/csv", "a.tgz": "application/x-tar",
		"a.py": "text/x-python", "a.json": "application/json", ".bashrc": "", "noext": "",
	} {
		if got := guessMimetype(name); got != want {
			t.Errorf("guessMimetype(%q) = %q, want %q", name, got, want)
		}
	}
}
