package contents

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// A full volume or a used-up quota is the server's lack of room (507), not a request too
// large (413): the same save works once space is freed. A file beyond the file system's
// largest file size is too large.
func TestFsError_FullVolumeIsNoSpaceNotTooLarge(t *testing.T) {
	for _, tc := range []struct {
		errno syscall.Errno
		kind  error
	}{
		{syscall.ENOSPC, domainerr.ErrNoSpace},
		{syscall.EDQUOT, domainerr.ErrNoSpace},
		{syscall.EFBIG, domainerr.ErrTooLarge},
	} {
		err := fsError("d/a.ipynb", fmt.Errorf("save: %w", &os.PathError{Op: "write", Path: "/srv/root/d/.~nbkube-1.tmp", Err: tc.errno}))
		var de *domainerr.Error
		if !errors.As(err, &de) || !errors.Is(err, tc.kind) {
			t.Errorf("%v: %v, want a refusal of kind %v", tc.errno, err, tc.kind)
			continue
		}
		if want := "No room to write d/a.ipynb: " + tc.errno.Error(); de.Message != want {
			t.Errorf("%v: message %q, want %q (the API path, never the server's)", tc.errno, de.Message, want)
		}
	}
}
