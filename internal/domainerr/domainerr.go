// Package domainerr is the one error type with which nbkube's stores refuse a request: the
// contents store and the repositories over the custom resources. A refusal carries its kind
// (match with errors.Is), the message Jupyter would give the client, and Jupyter's optional
// short reason. The API server maps a kind to an HTTP status in one place; an error of no
// kind is a failure of the server, answered without its details.
//
// It imports the standard library only, so that any layer can refuse without depending on
// another.
package domainerr

import (
	"errors"
	"fmt"
)

// The kinds of refusal.
var (
	// ErrNotFound: the file, directory, checkpoint or resource does not exist, or belongs to
	// another user (404).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the target already exists, or the resource's state refuses the request:
	// starting a running cluster, stopping a stopped one (409).
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request is malformed or cannot be carried out as asked (400).
	ErrInvalid = errors.New("invalid")
	// ErrForbidden: permission denied, a hidden path, or a path outside the root (403).
	ErrForbidden = errors.New("forbidden")
	// ErrTooLarge: the content exceeds a size limit of the store (413).
	ErrTooLarge = errors.New("too large")
	// ErrNoSpace: the volume is full, or its quota is used up (507, Insufficient Storage).
	// Not ErrTooLarge: the request is not too large, the server lacks room for it, and a
	// client that retries after space is freed succeeds.
	ErrNoSpace = errors.New("insufficient storage")
	// ErrStartFailed: a kernel could not start, or is not running; the reason says why.
	// Jupyter answers it with 500.
	ErrStartFailed = errors.New("kernel start failed")
	// ErrUnavailable: the cluster's control plane (the Kubernetes API) did not answer in
	// time, or refused the connection (503, Service Unavailable). Nothing is wrong with the
	// request: the same one succeeds once the control plane is back.
	ErrUnavailable = errors.New("unavailable")
	// ErrMethodNotAllowed: the path exists, but not for this method (405).
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrTimeout: the client did not send its request in time (408).
	ErrTimeout = errors.New("request timeout")
)

// Error is a refusal: Kind is one of the kinds above, Message is what Jupyter would tell the
// client, Reason is Jupyter's optional short reason ("bad type", "bad format", a Kernel
// condition's reason such as ImagePullBackOff) and Err the underlying cause, if any, for logs.
type Error struct {
	Kind    error
	Message string
	Reason  string
	Err     error
}

// Error returns the message only: it is what the client sees.
func (e *Error) Error() string { return e.Message }

// Is reports whether target is the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New is a refusal of kind with a formatted message.
func New(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// The refusals of each kind, with a formatted message: the one family every layer uses.

// NotFound is a refusal of kind ErrNotFound.
func NotFound(format string, args ...any) *Error { return New(ErrNotFound, format, args...) }

// Conflict is a refusal of kind ErrConflict.
func Conflict(format string, args ...any) *Error { return New(ErrConflict, format, args...) }

// Invalid is a refusal of kind ErrInvalid.
func Invalid(format string, args ...any) *Error { return New(ErrInvalid, format, args...) }

// Forbidden is a refusal of kind ErrForbidden.
func Forbidden(format string, args ...any) *Error { return New(ErrForbidden, format, args...) }

// TooLarge is a refusal of kind ErrTooLarge.
func TooLarge(format string, args ...any) *Error { return New(ErrTooLarge, format, args...) }

// Unavailable is a refusal of kind ErrUnavailable.
func Unavailable(format string, args ...any) *Error { return New(ErrUnavailable, format, args...) }
