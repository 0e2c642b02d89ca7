package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
)

// Server-side execution (agentapi.PathExecute): cells run with no client, and their outputs
// are written into the notebook as the runs of a client that is away. The agent, not an API
// server, keeps the order of the requests: two replicas asked in turn still send them in turn,
// and a replica that dies after it answered loses nothing, since the cells are in the kernel's
// queue and the agent writes what they send.

// maxExecuteIDs bounds the request ids remembered for ordering.
const maxExecuteIDs = 4096

// maxRequestID bounds a request id's length.
const maxRequestID = 256

// executor sends the cells of execute requests. Its fields are guarded by mu, which is held
// while a request's cells are sent, so that the cells of one request follow each other.
type executor struct {
	mu sync.Mutex
	// sess is the client session of the runs: never connected, so what they send is written.
	sess *clientSession
	// signals are by request id: closed once the request's cells are sent; made early for a
	// request that a later one waits for.
	signals map[string]chan struct{}
	order   []string
}

func newExecutor() *executor {
	return &executor{sess: &clientSession{id: newID()}, signals: map[string]chan struct{}{}}
}

// signal is the channel of a request id, made if new; the caller holds mu.
func (e *executor) signalLocked(id string) chan struct{} {
	ch := e.signals[id]
	if ch == nil {
		ch = make(chan struct{})
		e.signals[id] = ch
		e.order = append(e.order, id)
		if len(e.order) > maxExecuteIDs {
			delete(e.signals, e.order[0])
			e.order = e.order[1:]
		}
	}
	return ch
}

// waitFor waits until request id was sent, at most agentapi.ExecuteOrderWait.
func (e *executor) waitFor(id string, done <-chan struct{}) bool {
	e.mu.Lock()
	ch := e.signalLocked(id)
	e.mu.Unlock()
	t := time.NewTimer(agentapi.ExecuteOrderWait)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-done:
	}
	return false
}

// sentLocked notes that request id was sent.
func (e *executor) sentLocked(id string) {
	ch := e.signalLocked(id)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// serveExecute is agentapi.PathExecute.
func (a *Agent) serveExecute(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, agentapi.MaxExecuteBytes, "an execute request")
	if !ok {
		return
	}
	var req agentapi.Execute
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad body: "+err.Error())
		return
	}
	if msg := executeProblem(req); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if a.rec == nil {
		writeError(w, http.StatusConflict, "the kernel's agent knows no contents directory to write outputs into")
		return
	}
	if req.PreviousRequestID != "" && !a.exec.waitFor(req.PreviousRequestID, r.Context().Done()) {
		writeError(w, http.StatusRequestTimeout, fmt.Sprintf("the previous request %q was not sent within %s", req.PreviousRequestID, agentapi.ExecuteOrderWait))
		return
	}
	inc, err := a.running()
	if err != nil {
		a.answer(w, err)
		return
	}
	e := a.exec
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, cell := range req.Cells {
		msgID := newID()
		if req.RequestID != "" {
			msgID = agentapi.ExecuteMsgID(req.RequestID, cell.CellID)
		}
		m, h, err := cellRequest(msgID, e.sess.id, cell)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		a.mu.Lock()
		a.recordRunLocked(req.Notebook, e.sess, h, m)
		a.lastActivity = time.Now()
		a.mu.Unlock()
		if err := inc.send(wire.Shell, wire.EncodeZMQ(m, a.signer)); err != nil {
			// The kernel went meanwhile (a restart, a death): the cells sent before are its.
			writeError(w, http.StatusConflict, "the kernel stopped taking requests: "+err.Error())
			return
		}
	}
	if req.RequestID != "" {
		e.sentLocked(req.RequestID)
	}
	w.WriteHeader(http.StatusNoContent)
}

// executeProblem says what is wrong with an execute request; "" when nothing.
func executeProblem(req agentapi.Execute) string {
	switch {
	case !validNotebook(req.Notebook):
		return "notebook must be a relative, clean .ipynb path"
	case len(req.Cells) == 0:
		return "no cells to run"
	case len(req.RequestID) > maxRequestID || len(req.PreviousRequestID) > maxRequestID:
		return fmt.Sprintf("request ids are at most %d bytes", maxRequestID)
	case req.RequestID != "" && req.RequestID == req.PreviousRequestID:
		return "a request cannot come after itself"
	}
	for _, c := range req.Cells {
		if c.CellID == "" || len(c.CellID) > maxRequestID {
			return "every cell needs its id"
		}
	}
	return ""
}

// cellRequest is the execute_request of a cell, of the executor's session: it stores
// history (the cell gets its execution count, as a client's run), asks for no input (no one
// would answer) and stops the cells after a failed one, as Run All does.
func cellRequest(msgID, session string, cell agentapi.ExecuteCell) (*wire.Message, wire.Header, error) {
	h := wire.Header{MsgID: msgID, Username: "nbkube", Session: session, Date: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		MsgType: "execute_request", Version: "5.3"}
	header, err := json.Marshal(h)
	if err != nil {
		return nil, h, err
	}
	md, err := json.Marshal(map[string]string{"cellId": cell.CellID})
	if err != nil {
		return nil, h, err
	}
	content, err := json.Marshal(map[string]any{"code": cell.Code, "silent": false, "store_history": true,
		"user_expressions": map[string]any{}, "allow_stdin": false, "stop_on_error": true})
	if err != nil {
		return nil, h, err
	}
	return &wire.Message{Channel: wire.Shell, Header: header, ParentHeader: json.RawMessage(`{}`), Metadata: md, Content: content}, h, nil
}
