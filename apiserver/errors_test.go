package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
)

func TestAnswerTo_MapsEveryKindOfErrorToJupytersAnswer(t *testing.T) {
	reason := func(s string) *string { return &s }
	for _, tc := range []struct {
		name   string
		err    error
		status int
		body   jupyter.Error
		failed bool
	}{
		{
			name:   "handler's own",
			err:    domainerr.Invalid("Type %s is invalid", "'x'"),
			status: http.StatusBadRequest,
			body:   jupyter.Error{Message: "Type 'x' is invalid"},
			failed: false,
		},
		{
			name:   "body too large",
			err:    fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}),
			status: http.StatusRequestEntityTooLarge,
			body:   jupyter.Error{Message: "request body larger than 10 bytes"},
			failed: false,
		},
		{
			name:   "store refusal with a reason",
			err:    &domainerr.Error{Kind: domainerr.ErrInvalid, Message: "bad", Reason: "bad type"},
			status: http.StatusBadRequest,
			body:   jupyter.Error{Message: "bad", Reason: reason("bad type")},
			failed: false,
		},
		{
			name:   "store refusal",
			err:    &domainerr.Error{Kind: domainerr.ErrForbidden, Message: "Permission denied: x"},
			status: http.StatusForbidden,
			body:   jupyter.Error{Message: "Permission denied: x"},
			failed: false,
		},
		{
			name:   "store limit",
			err:    &domainerr.Error{Kind: domainerr.ErrTooLarge, Message: "No room"},
			status: http.StatusRequestEntityTooLarge,
			body:   jupyter.Error{Message: "No room"},
			failed: false,
		},
		{
			name:   "full volume",
			err:    &domainerr.Error{Kind: domainerr.ErrNoSpace, Message: "No room to write a.ipynb: no space left on device"},
			status: http.StatusInsufficientStorage,
			body:   jupyter.Error{Message: "No room to write a.ipynb: no space left on device"},
			failed: false,
		},
		{
			name:   "existing target",
			err:    &domainerr.Error{Kind: domainerr.ErrConflict, Message: "exists"},
			status: http.StatusConflict,
			body:   jupyter.Error{Message: "exists"},
			failed: false,
		},
		{
			name:   "missing resource",
			err:    &domainerr.Error{Kind: domainerr.ErrNotFound, Message: "Kernel does not exist: k"},
			status: http.StatusNotFound,
			body:   jupyter.Error{Message: "Kernel does not exist: k"},
			failed: false,
		},
		{
			name:   "bare sentinel",
			err:    domainerr.ErrNotFound,
			status: http.StatusNotFound,
			body:   jupyter.Error{Message: "not found"},
			failed: false,
		},
		{
			name:   "refused state",
			err:    &domainerr.Error{Kind: domainerr.ErrConflict, Message: "Cluster not running"},
			status: http.StatusConflict,
			body:   jupyter.Error{Message: "Cluster not running"},
			failed: false,
		},
		{
			name:   "kernel that did not start",
			err:    &domainerr.Error{Kind: domainerr.ErrStartFailed, Reason: "ImagePullBackOff", Message: "the kernel failed to start: pull"},
			status: http.StatusInternalServerError,
			body:   jupyter.Error{Message: "the kernel failed to start: pull", Reason: reason("ImagePullBackOff")},
			failed: false,
		},
		{
			name:   "control plane away",
			err:    &domainerr.Error{Kind: domainerr.ErrUnavailable, Reason: "ControlPlaneUnavailable", Message: "The cluster's API server did not create the kernel within 5s: try again shortly"},
			status: http.StatusServiceUnavailable,
			body:   jupyter.Error{Message: "The cluster's API server did not create the kernel within 5s: try again shortly", Reason: reason("ControlPlaneUnavailable")},
			failed: false,
		},
		{
			name:   "agent's refusal",
			err:    &agentclient.Error{Status: http.StatusConflict, Message: "busy"},
			status: http.StatusConflict,
			body:   jupyter.Error{Message: "busy"},
			failed: false,
		},
		{
			name:   "agent refusing the server's token",
			err:    &agentclient.Error{Status: http.StatusForbidden, Message: "bad token"},
			status: http.StatusBadGateway,
			body:   jupyter.Error{Message: "bad token"},
			failed: false,
		},
		{
			name:   "agent not reachable",
			err:    fmt.Errorf("%w: dial tcp 10.0.0.7:8000: refused", agentclient.ErrUnreachable),
			status: http.StatusServiceUnavailable,
			body:   jupyter.Error{Message: "the kernel is not reachable"},
			failed: false,
		},
		{
			name:   "server failure",
			err:    errors.New("open /srv/data/x: input/output error"),
			status: http.StatusInternalServerError,
			body:   jupyter.Error{Message: "Unhandled error"},
			failed: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, failed := answerTo(tc.err)
			if status != tc.status || failed != tc.failed {
				t.Errorf("status %d, failed %v; want %d, %v", status, failed, tc.status, tc.failed)
			}
			if d := cmp.Diff(tc.body, body); d != "" {
				t.Errorf("body (-want +got):\n%s", d)
			}
		})
	}
}
