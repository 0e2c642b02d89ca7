package repository

import "github.com/nbkube/nbkube/internal/domainerr"

// The repositories refuse requests with domainerr.Error; a start that failed carries the
// Kernel condition's reason (ImagePullBackOff, Unschedulable, KernelExited, StartTimeout, ...).

func notFound(message string) error {
	return &domainerr.Error{Kind: domainerr.ErrNotFound, Message: message}
}
func invalid(message string) error {
	return &domainerr.Error{Kind: domainerr.ErrInvalid, Message: message}
}
func forbidden(message string) error {
	return &domainerr.Error{Kind: domainerr.ErrForbidden, Message: message}
}
func conflict(message string) error {
	return &domainerr.Error{Kind: domainerr.ErrConflict, Message: message}
}

func startFailed(reason, message string) error {
	return &domainerr.Error{Kind: domainerr.ErrStartFailed, Reason: reason, Message: message}
}
