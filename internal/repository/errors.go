package repository

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/util/retry"

	"github.com/nbkube/nbkube/internal/domainerr"
)

// The repositories refuse requests with domainerr.Error; a start that failed carries the
// Kernel condition's reason (ImagePullBackOff, Unschedulable, KernelExited, StartTimeout, ...).

func startFailed(reason, message string) error {
	return &domainerr.Error{Kind: domainerr.ErrStartFailed, Reason: reason, Message: message}
}

// ReasonControlPlaneUnavailable is the reason of a start refused because the Kubernetes API
// did not answer (domainerr.ErrUnavailable).
const ReasonControlPlaneUnavailable = "ControlPlaneUnavailable"

// unavailable is the refusal of a request whose call to the Kubernetes API did not get
// through within d; err is kept for the logs.
func unavailable(what string, d time.Duration, err error) error {
	return &domainerr.Error{Kind: domainerr.ErrUnavailable, Reason: ReasonControlPlaneUnavailable, Err: err,
		Message: fmt.Sprintf("The cluster's API server did not %s within %s: try again shortly", what, d)}
}

// controlPlaneDown tells whether err, from a call to the Kubernetes API bounded by its own
// deadline, says that the control plane is not there rather than that it refused the call:
// the deadline passed (a stopped or overloaded API server or etcd), the connection was
// refused (a restarting API server), or the API server itself answered that it cannot serve
// (its etcd timed out).
func controlPlaneDown(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || utilnet.IsConnectionRefused(err) ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsServiceUnavailable(err)
}

// failure adds what to an error the server failed with; a refusal (a domainerr.Error, such as
// an ErrUnavailable of a bounded call) is returned as it is, since its message is the client's.
func failure(err error, what string) error {
	var de *domainerr.Error
	if err == nil || errors.As(err, &de) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// retryOnConflict runs fn again while its write loses to a newer version of the object, as
// client-go's retry.RetryOnConflict does, and returns fn's last error as it is. That one
// takes an error that wraps a context's end (an ErrUnavailable refusal wraps the deadline of
// the call that got no answer) for the end of its own waiting and returns nil in its place,
// as if the write had been made.
func retryOnConflict(fn func() error) error {
	var last error
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		last = fn()
		return last
	})
	if err == nil {
		return last
	}
	return err
}

// boundedCall runs f, one call to the Kubernetes API, within d. A control plane that is not
// there (f's deadline passed, its connection was refused, the API server timed out or is
// unavailable) makes it an ErrUnavailable refusal; what says what the call does, for its
// message ("create the kernel"). The end of ctx itself, the client's, is returned as it is.
func boundedCall(ctx context.Context, d time.Duration, what string, f func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := f(wctx)
	if err == nil || ctx.Err() != nil || !controlPlaneDown(err) {
		return err
	}
	return unavailable(what, d, err)
}
