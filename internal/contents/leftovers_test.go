package contents

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/jupyter"
)

// A temporary file that a save killed mid-write left behind is swept when its directory is
// listed, once it is old enough not to be a save under way; a recent one stays.
func TestList_SweepsLeftoverTemporaryFiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		age  time.Duration
		gone bool
	}{
		{"stale", 2 * time.Hour, true},
		{"recent", time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := newTestStore(t, Options{Clock: clocktesting.NewFakePassiveClock(time.Now().Add(tc.age))})
			tmp := "d/" + tempPrefix + "0123abcd.tmp"
			writeTree(t, root, map[string]string{"d/": "", "d/a.txt": "a", tmp: "half a notebook"})
			m, err := s.Get(t.Context(), "d", GetOptions{Content: true})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(m.Content.([]jupyter.ContentsModel)); n != 1 {
				t.Errorf("listing has %d entries, want a.txt alone", n)
			}
			_, err = os.Stat(filepath.Join(root, tmp))
			if gone := os.IsNotExist(err); gone != tc.gone {
				t.Errorf("temporary file gone: %v, want %v (%v)", gone, tc.gone, err)
			}
		})
	}
}
