package repository

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nbkube/nbkube/internal/domainerr"
)

func TestRetryOnConflict_ReturnsTheWritesOwnError(t *testing.T) {
	refused := unavailable("change the session", time.Second, fmt.Errorf("put: %w", context.DeadlineExceeded))
	if err := retryOnConflict(func() error { return refused }); !errors.Is(err, domainerr.ErrUnavailable) {
		t.Errorf("a write refused at its deadline: %v, want the refusal", err)
	}
	calls := 0
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "sessions"}, "s", errors.New("newer version"))
	err := retryOnConflict(func() error {
		if calls++; calls < 3 {
			return conflict
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("a write that lost twice: %v after %d calls, want nil after 3", err, calls)
	}
}

func TestFailure_WrapsOnlyWhatTheServerFailedWith(t *testing.T) {
	refused := unavailable("delete the kernel", time.Second, context.DeadlineExceeded)
	if got := failure(refused, "delete kernel"); got.Error() != refused.Error() {
		t.Errorf("a refusal became %q: its message is the client's", got)
	}
	broken := errors.New("connection reset")
	if got := failure(broken, "delete kernel"); got.Error() != "delete kernel: connection reset" || !errors.Is(got, broken) {
		t.Errorf("a failure became %q, want it wrapped with what failed", got)
	}
	if failure(nil, "delete kernel") != nil {
		t.Error("no error became one")
	}
}
