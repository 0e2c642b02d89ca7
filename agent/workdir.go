package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
)

// envName is what Kubernetes takes as the name of a container's environment variable.
var envName = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// workDirTimeout bounds the wait for the execute_reply of a WorkDir's Code: moving a kernel
// is quick, and one busy with a cell would only answer after it.
const workDirTimeout = 10 * time.Second

// errNoExecuteReply ends the wait for a WorkDir's Code at workDirTimeout.
var errNoExecuteReply = fmt.Errorf("the kernel did not answer within %s", workDirTimeout)

// serveWorkDir moves the kernel to another working directory (agentapi.PathWorkDir): the
// current process by the request's Code, later ones by their start. The directory is kept
// for them only once the move succeeded, so that a refused one cannot make every later start
// fail.
func (a *Agent) serveWorkDir(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, agentapi.MaxWorkDirBytes, "body")
	if !ok {
		return
	}
	var req agentapi.WorkDir
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad body: "+err.Error())
		return
	}
	if !filepath.IsLocal(req.Dir) || filepath.Clean(req.Dir) != req.Dir {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("dir %q is not a clean relative path inside the kernel's starting directory", req.Dir))
		return
	}
	for name := range req.Env {
		if !envName.MatchString(name) || strings.HasPrefix(name, agentapi.EnvPrefix) || name == "HOME" {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("env %q cannot be set in a kernel's environment", name))
			return
		}
	}
	inc, err := a.running()
	if err != nil {
		a.answer(w, err)
		return
	}
	base := a.cfg.WorkDir
	if base == "" {
		if base, err = os.Getwd(); err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	dir := filepath.Join(base, req.Dir)
	// The agent shares the kernel's container: a directory it cannot see would fail the
	// kernel's next start.
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		writeError(w, http.StatusUnprocessableEntity, fmt.Sprintf("%s is not a directory", req.Dir))
		return
	}
	if req.Code != "" {
		reply, err := a.executeSilently(r.Context(), inc, req.Code)
		switch {
		case errors.Is(err, errNoExecuteReply):
			writeError(w, http.StatusGatewayTimeout, err.Error())
			return
		case err != nil:
			a.answer(w, err)
			return
		case reply.Status != "ok":
			writeError(w, http.StatusUnprocessableEntity, reply.String())
			return
		}
	}
	a.mu.Lock()
	a.workDir = dir
	for name, value := range req.Env {
		a.extraEnv = append(a.extraEnv, name+"="+value)
	}
	a.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// running is the incarnation clients talk to, or why there is none.
func (a *Agent) running() (*incarnation, error) {
	if !a.isReady() {
		return nil, errors.New("the kernel has not started yet")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.stopping:
		return nil, errors.New("the kernel is shutting down")
	case a.inc == nil:
		return nil, errors.New("the kernel is restarting or dead")
	case a.hbDead:
		return nil, errors.New("the kernel does not answer its heartbeat")
	}
	return a.inc, nil
}

// executeReply is the part of an execute_reply's content that tells how the code ended.
type executeReply struct {
	Status string `json:"status"`
	EName  string `json:"ename"`
	EValue string `json:"evalue"`
}

func (r executeReply) String() string {
	if r.Status == "error" {
		return fmt.Sprintf("the code raised %s: %s", r.EName, r.EValue)
	}
	return fmt.Sprintf("the code ended with status %q", r.Status)
}

// executeSilently runs code in inc as the agent's own silent execute_request, which leaves
// the execution count and the history alone, and returns its reply; it waits at most
// workDirTimeout, and not past the incarnation's end.
func (a *Agent) executeSilently(ctx context.Context, inc *incarnation, code string) (executeReply, error) {
	content, _ := json.Marshal(map[string]any{"code": code, "silent": true, "store_history": false,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
	replies := make(chan *wire.Message, 1)
	id, err := a.requestInto(inc, wire.Shell, "execute_request", string(content), replies)
	if err != nil {
		return executeReply{}, err
	}
	defer func() {
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeoutCause(ctx, workDirTimeout, errNoExecuteReply)
	defer cancel()
	var reply executeReply
	select {
	case m := <-replies:
		if err := json.Unmarshal(m.Content, &reply); err != nil {
			return reply, fmt.Errorf("execute_reply: %w", err)
		}
		return reply, nil
	case <-inc.exited:
		return reply, errors.New("the kernel exited before it answered")
	case <-ctx.Done():
		return reply, context.Cause(ctx)
	}
}
