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
		{"handler's own", badRequest("Type %s is invalid", "'x'"), http.StatusBadRequest, jupyter.Error{Message: "Type 'x' is invalid"}, false},
		{"body too large", fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}), http.StatusRequestEntityTooLarge,
			jupyter.Error{Message: "request body larger than 10 bytes"}, false},
		{"store refusal with a reason", &domainerr.Error{Kind: domainerr.ErrInvalid, Message: "bad", Reason: "bad type"}, http.StatusBadRequest,
			jupyter.Error{Message: "bad", Reason: reason("bad type")}, false},
		{"store refusal", &domainerr.Error{Kind: domainerr.ErrForbidden, Message: "Permission denied: x"}, http.StatusForbidden,
			jupyter.Error{Message: "Permission denied: x"}, false},
		{"store limit", &domainerr.Error{Kind: domainerr.ErrTooLarge, Message: "No room"}, http.StatusRequestEntityTooLarge, jupyter.Error{Message: "No room"}, false},
		{"existing target", &domainerr.Error{Kind: domainerr.ErrConflict, Message: "exists"}, http.StatusConflict, jupyter.Error{Message: "exists"}, false},
		{"missing resource", &domainerr.Error{Kind: domainerr.ErrNotFound, Message: "Kernel does not exist: k"}, http.StatusNotFound,
			jupyter.Error{Message: "Kernel does not exist: k"}, false},
		{"bare sentinel", domainerr.ErrNotFound, http.StatusNotFound, jupyter.Error{Message: "not found"}, false},
		{"refused state", &domainerr.Error{Kind: domainerr.ErrConflict, Message: "Cluster not running"}, http.StatusConflict,
			jupyter.Error{Message: "Cluster not running"}, false},
		{"kernel that did not start", &domainerr.Error{Kind: domainerr.ErrStartFailed, Reason: "ImagePullBackOff", Message: "the kernel failed to start: pull"},
			http.StatusInternalServerError, jupyter.Error{Message: "the kernel failed to start: pull", Reason: reason("ImagePullBackOff")}, false},
		{"agent's refusal", &agentclient.Error{Status: http.StatusConflict, Message: "busy"}, http.StatusConflict, jupyter.Error{Message: "busy"}, false},
		{"agent refusing the server's token", &agentclient.Error{Status: http.StatusForbidden, Message: "bad token"}, http.StatusBadGateway,
			jupyter.Error{Message: "bad token"}, false},
		{"agent not reachable", fmt.Errorf("%w: dial tcp 10.0.0.7:8000: refused", agentclient.ErrUnreachable), http.StatusServiceUnavailable,
			jupyter.Error{Message: "the kernel is not reachable"}, false},
		{"server failure", errors.New("open /srv/data/x: input/output error"), http.StatusInternalServerError, jupyter.Error{Message: "Unhandled error"}, true},
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
