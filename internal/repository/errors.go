package repository

import "errors"

// The kinds of domain error. Every refusal the repositories return is an *Error of one of
// these kinds (match with errors.Is); an error of no kind is a failure of the server.
var (
	// ErrNotFound: the resource does not exist, or belongs to another user.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request cannot be carried out as asked.
	ErrInvalid = errors.New("invalid")
	// ErrConflict: the resource's state refuses the request: starting a running cluster,
	// stopping a stopped one.
	ErrConflict = errors.New("conflict")
	// ErrStartFailed: a kernel could not start, or is not running; Reason says why.
	ErrStartFailed = errors.New("kernel start failed")
)

// Error is a refusal of a repository. Kind is one of the sentinel errors above; Message is
// what Jupyter would tell the client; Reason is a short machine-readable cause, the Kernel
// condition's reason for a kernel that could not start (ImagePullBackOff, Unschedulable,
// KernelExited, StartTimeout, ...).
type Error struct {
	Kind    error
	Message string
	Reason  string
}

// Error returns the message only: it is what the client sees.
func (e *Error) Error() string { return e.Message }

// Is reports whether target is the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

func notFound(message string) error { return &Error{Kind: ErrNotFound, Message: message} }
func invalid(message string) error  { return &Error{Kind: ErrInvalid, Message: message} }
func conflict(message string) error { return &Error{Kind: ErrConflict, Message: message} }

func startFailed(reason, message string) error {
	return &Error{Kind: ErrStartFailed, Reason: reason, Message: message}
}
