package contents

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// The store refuses requests with domainerr.Error (domainerr.NotFound, Invalid, ...), whose
// kinds the API server maps to HTTP.

// errPathEscapes is the message of os.Root's unexported error for a symbolic link that leaves
// the root; the os package offers no other way to recognise it.
const errPathEscapes = "path escapes from parent"

// fsError turns a file system error about the API path p into a domain error where it is one
// (missing, permission, escape, name too long, no space), and wraps it as a server failure otherwise.
func fsError(p string, err error) error {
	if err == nil {
		return nil
	}
	var de *domainerr.Error
	if errors.As(err, &de) {
		return err
	}
	var errno syscall.Errno
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.As(err, &errno) && errno == syscall.ENOTDIR:
		return &domainerr.Error{Kind: domainerr.ErrNotFound, Message: "No such file or directory: " + p, Err: err}
	case errors.Is(err, fs.ErrPermission), errors.As(err, &errno) && errno == syscall.EROFS:
		return &domainerr.Error{Kind: domainerr.ErrForbidden, Message: "Permission denied: " + p, Err: err}
	case errors.As(err, &errno) && (errno == syscall.ENAMETOOLONG || errno == syscall.ELOOP):
		return &domainerr.Error{Kind: domainerr.ErrInvalid, Message: fmt.Sprintf("Invalid path %s: %v", p, errno), Err: err}
	case errors.As(err, &errno) && errno == syscall.EFBIG:
		return &domainerr.Error{Kind: domainerr.ErrTooLarge, Message: fmt.Sprintf("No room to write %s: %v", p, errno), Err: err}
	case errors.As(err, &errno) && (errno == syscall.ENOSPC || errno == syscall.EDQUOT):
		return &domainerr.Error{Kind: domainerr.ErrNoSpace, Message: fmt.Sprintf("No room to write %s: %v", p, errno), Err: err}
	case escapes(err):
		return &domainerr.Error{Kind: domainerr.ErrForbidden, Message: p + " is outside root contents directory", Err: err}
	}
	return fmt.Errorf("%s: %w", p, err)
}

func escapes(err error) bool {
	var pe *os.PathError
	if !errors.As(err, &pe) {
		return false
	}
	// os.Root's MkdirAll wraps the error of the component it stat'ed in its own.
	if inner := (*os.PathError)(nil); errors.As(pe.Err, &inner) {
		return escapes(inner)
	}
	var errno syscall.Errno
	return !errors.As(pe.Err, &errno) && pe.Err.Error() == errPathEscapes
}
