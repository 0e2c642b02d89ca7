package contents

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Domain errors of the store. Every error the store returns for a request it refuses wraps one
// of them (match with errors.Is) inside an *Error that carries Jupyter's human message; errors
// that wrap none of them are failures of the server (500).
var (
	// ErrNotFound: the file, directory or checkpoint does not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrExists: the target already exists (409).
	ErrExists = errors.New("already exists")
	// ErrInvalid: the request is malformed or cannot be satisfied as asked (400).
	ErrInvalid = errors.New("invalid request")
	// ErrForbidden: permission denied, a hidden path, or a path outside the root (403).
	ErrForbidden = errors.New("forbidden")
	// ErrTooLarge: the content exceeds a size limit of the store (413).
	ErrTooLarge = errors.New("too large")
)

// Error is a refusal of the store: Kind is one of the sentinel errors, Message is what Jupyter
// would tell the client, Reason is Jupyter's optional short reason ("bad type", "bad format")
// and Err the underlying cause, if any, for logs.
type Error struct {
	Kind    error
	Message string
	Reason  string
	Err     error
}

// Error returns the human message only: it is what the client sees.
func (e *Error) Error() string { return e.Message }

// Is reports whether target is the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func newError(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *Error { return newError(ErrNotFound, format, args...) }
func invalid(format string, args ...any) *Error  { return newError(ErrInvalid, format, args...) }
func forbidden(format string, args ...any) *Error {
	return newError(ErrForbidden, format, args...)
}

// errPathEscapes is the message of os.Root's unexported error for a symbolic link that leaves
// the root; the os package offers no other way to recognise it.
const errPathEscapes = "path escapes from parent"

// fsError turns a file system error about the API path p into a domain error where it is one
// (missing, permission, escape, name too long), and wraps it as a server failure otherwise.
func fsError(p string, err error) error {
	if err == nil {
		return nil
	}
	var de *Error
	if errors.As(err, &de) {
		return err
	}
	var errno syscall.Errno
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.As(err, &errno) && errno == syscall.ENOTDIR:
		return &Error{Kind: ErrNotFound, Message: "No such file or directory: " + p, Err: err}
	case errors.Is(err, fs.ErrPermission), errors.As(err, &errno) && errno == syscall.EROFS:
		return &Error{Kind: ErrForbidden, Message: "Permission denied: " + p, Err: err}
	case errors.As(err, &errno) && (errno == syscall.ENAMETOOLONG || errno == syscall.ELOOP):
		return &Error{Kind: ErrInvalid, Message: fmt.Sprintf("Invalid path %s: %v", p, errno), Err: err}
	case errors.As(err, &errno) && (errno == syscall.EFBIG || errno == syscall.ENOSPC || errno == syscall.EDQUOT):
		return &Error{Kind: ErrTooLarge, Message: fmt.Sprintf("No room to write %s: %v", p, errno), Err: err}
	case escapes(err):
		return &Error{Kind: ErrForbidden, Message: p + " is outside root contents directory", Err: err}
	}
	return fmt.Errorf("%s: %w", p, err)
}

func escapes(err error) bool {
	var pe *os.PathError
	if !errors.As(err, &pe) {
		return false
	}
	var errno syscall.Errno
	return !errors.As(pe.Err, &errno) && pe.Err.Error() == errPathEscapes
}
