package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/nbformat"
	"github.com/nbkube/nbkube/internal/wire"
)

// Outputs that outlive the browser. A client that runs a cell of a notebook names the cell in
// its execute_request (metadata.cellId, as JupyterLab and nbkube's page do), and the API
// server names the notebook of the kernel's session when it connects (QueryNotebook). The
// agent keeps each such run's output messages; while the client that ran it is connected the
// client has them and saves them itself, but once that client is away (its tab closed, its
// network gone, every API server replica killed) the agent writes them into the cell of the
// notebook file on the volume it shares with the kernel, within a second of each message.
// Only the cells run change, and only while their stored source is the code that ran.

// Timing and bounds of recording.
const (
	// recordDelay batches the messages that arrive close together into one write.
	recordDelay = 100 * time.Millisecond
	// awayGrace is how long a client must have been away before its runs are written: a
	// client that reconnects at once (a network blip) saves what it has itself, and a write
	// meanwhile would make its next save a conflict.
	awayGrace = 300 * time.Millisecond
	// foldAfter folds a run's messages into outputs once this many wait: a run with its
	// client connected is never written, but must not hold every message it ever sent.
	foldAfter = 512
	// maxRuns bounds the runs recorded at once; the oldest goes first.
	maxRuns = 256
	// outputTempPrefix names the temporary file of a write, the contents store's prefix (its
	// leftovers are swept alike and never listed).
	outputTempPrefix = ".~nbkube-"
)

// maxRunBytes bounds what one run keeps of its output messages; what comes after is not
// written, and the cell says so.
const maxRunBytes = 32 << 20

// recorder keeps the runs of cells. Its maps and the runs' fields marked so are guarded by
// the agent's mutex; the outputs are the flusher's own.
type recorder struct {
	root *os.Root
	// bytes is what the runs hold of output messages, at most limit (half the agent's
	// memory budget): past it, runs keep no more.
	bytes, limit int
	// runs are by the execute_request's msg_id.
	runs  map[string]*cellRun
	order []*cellRun
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

// cellRun is one execute_request of a cell of a notebook.
type cellRun struct {
	msgID, cellID, code string
	// notebook is guarded by the agent's mutex: a rename moves it (moveNotebook).
	notebook string
	// sess is the client session that ran it: while it has a connection, the client keeps
	// the outputs itself.
	sess *clientSession
	// Guarded by the agent's mutex:
	pending   []*wire.Message
	count     *int
	execution map[string]any
	finished  bool
	dirty     bool
	gone      bool
	bytes     int
	truncated bool
	// The flusher's own:
	outputs  []any
	displays map[string][]int
	// texts are the texts of stream outputs (by index in outputs) that later stream
	// messages were merged into: appended here, which stays linear in the text's length, and
	// put into the output when the run is written.
	texts     map[int]*strings.Builder
	clearWait bool
}

// newRecorder records into the notebooks under dir; nil when dir is empty or cannot be
// opened (recording off).
func (a *Agent) newRecorder(dir string) *recorder {
	if dir == "" {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		a.cfg.Log.Error(err, "Cannot open the contents directory; outputs of runs whose client is away will not be written", "dir", dir)
		return nil
	}
	r := &recorder{root: root, limit: int(min(a.cfg.MemoryBudget/2, 1<<40)), runs: map[string]*cellRun{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go a.flushLoop(r)
	return r
}

// serveNotebookMove is agentapi.PathNotebook: the session's notebook was renamed.
func (a *Agent) serveNotebookMove(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, 64<<10, "a notebook move")
	if !ok {
		return
	}
	var mv agentapi.NotebookMove
	if err := json.Unmarshal(body, &mv); err != nil || !validNotebook(mv.From) || !validNotebook(mv.To) {
		writeError(w, http.StatusBadRequest, "the body must be {\"from\": notebook, \"to\": notebook}, relative .ipynb paths")
		return
	}
	a.moveNotebook(mv.From, mv.To)
	w.WriteHeader(http.StatusNoContent)
}

// moveNotebook makes the connections and the runs of notebook from write into to.
func (a *Agent) moveNotebook(from, to string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sessions {
		if s.conn != nil && s.conn.notebook == from {
			s.conn.notebook = to
		}
	}
	if a.rec == nil {
		return
	}
	for _, run := range a.rec.order {
		if run.notebook == from {
			run.notebook = to
		}
	}
}

// validNotebook is a notebook path an API server may name: relative, clean, an .ipynb file.
func validNotebook(p string) bool {
	return p != "" && strings.HasSuffix(p, ".ipynb") && !path.IsAbs(p) && path.Clean(p) == p &&
		p != ".." && !strings.HasPrefix(p, "../") && !strings.ContainsRune(p, 0)
}

// startRunLocked records an execute_request from c (a connection that names a notebook) of
// a cell: its code and cell id.
func (a *Agent) startRunLocked(c *conn, h wire.Header, m *wire.Message) {
	if c.notebook == "" || c.sess == nil {
		return
	}
	a.recordRunLocked(c.notebook, c.sess, h, m)
}

// recordRunLocked records an execute_request of session sess of a cell of notebook.
func (a *Agent) recordRunLocked(notebook string, sess *clientSession, h wire.Header, m *wire.Message) {
	r := a.rec
	if r == nil {
		return
	}
	var md struct {
		CellID       string `json:"cellId"`
		RecordTiming bool   `json:"recordTiming"`
	}
	var content struct {
		Code   string `json:"code"`
		Silent bool   `json:"silent"`
	}
	if json.Unmarshal(m.Metadata, &md) != nil || md.CellID == "" || json.Unmarshal(m.Content, &content) != nil || content.Silent {
		return
	}
	if old := r.runs[h.MsgID]; old != nil {
		// A request sent again under its id: the new one is the run.
		a.forgetRunLocked(old)
	}
	if len(r.order) >= maxRuns {
		a.forgetRunLocked(r.order[0])
	}
	run := &cellRun{msgID: h.MsgID, notebook: notebook, cellID: md.CellID, code: content.Code, sess: sess}
	if md.RecordTiming {
		run.execution = map[string]any{}
	}
	r.runs[h.MsgID] = run
	r.order = append(r.order, run)
}

func (a *Agent) forgetRunLocked(run *cellRun) {
	r := a.rec
	run.gone = true
	r.bytes -= run.bytes
	if r.runs[run.msgID] == run {
		delete(r.runs, run.msgID)
	}
	for i, x := range r.order {
		if x == run {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
}

// recordLocked keeps an iopub message, or notes a shell reply, of a recorded run.
func (a *Agent) recordLocked(m *wire.Message, h wire.Header, parent wire.Header) {
	r := a.rec
	if r == nil {
		return
	}
	run := r.runs[parent.MsgID]
	if run == nil {
		return
	}
	if m.Channel != wire.IOPub {
		if h.MsgType != "execute_reply" {
			return
		}
		var reply struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(m.Content, &reply)
		if reply.Status == "aborted" {
			// Never ran (an earlier cell failed): nothing of it is written.
			a.forgetRunLocked(run)
			return
		}
		a.noteTiming(run, "shell.execute_reply", h.Date)
		var md struct {
			Started string `json:"started"`
		}
		if json.Unmarshal(m.Metadata, &md) == nil && md.Started != "" {
			a.noteTiming(run, "shell.execute_reply.started", md.Started)
		}
		return
	}
	switch h.MsgType {
	case "status":
		var st struct {
			ExecutionState string `json:"execution_state"`
		}
		_ = json.Unmarshal(m.Content, &st)
		switch st.ExecutionState {
		case "busy":
			a.noteTiming(run, "iopub.status.busy", h.Date)
		case "idle":
			a.noteTiming(run, "iopub.status.idle", h.Date)
			run.finished = true
			if run.sess.conn != nil {
				// Its client has it all.
				a.forgetRunLocked(run)
				return
			}
		default:
			return
		}
	case "execute_input":
		var in struct {
			ExecutionCount *int `json:"execution_count"`
		}
		if json.Unmarshal(m.Content, &in) == nil && in.ExecutionCount != nil {
			run.count = in.ExecutionCount
		}
		a.noteTiming(run, "iopub.execute_input", h.Date)
	case "stream", "display_data", "execute_result", "error", "update_display_data", "clear_output":
		size := messageSize(m)
		if run.bytes+size > maxRunBytes || r.bytes+size > r.limit {
			run.truncated = true
			return
		}
		run.bytes += size
		r.bytes += size
		run.pending = append(run.pending, m)
		if len(run.pending) >= foldAfter {
			a.wakeFlusher()
		}
	default:
		return
	}
	if run.sess.conn == nil {
		run.dirty = true
		a.wakeFlusher()
	}
}

func (a *Agent) noteTiming(run *cellRun, key, date string) {
	if run.execution != nil && date != "" {
		run.execution[key] = date
	}
}

// endRunsLocked ends the runs of the kernel process that is going (it died, or restarts):
// nothing more comes of them. Those whose client is connected are forgotten; the others are
// written as they are, then forgotten.
func (a *Agent) endRunsLocked() {
	if a.rec == nil {
		return
	}
	for _, run := range slices.Clone(a.rec.order) {
		run.finished = true
		if run.sess.conn != nil {
			a.forgetRunLocked(run)
		} else {
			run.dirty = true
		}
	}
	a.wakeFlusher()
}

// awayLocked marks the runs of a session whose connection left to be written.
func (a *Agent) awayLocked(s *clientSession) {
	if a.rec == nil {
		return
	}
	for _, run := range a.rec.order {
		if run.sess == s {
			run.dirty = true
		}
	}
	a.wakeFlusher()
}

func (a *Agent) wakeFlusher() {
	select {
	case a.rec.wake <- struct{}{}:
	default:
	}
}

// flushLoop writes the dirty runs of away clients, a recordDelay after it is woken, until
// the recorder stops (then once more).
func (a *Agent) flushLoop(r *recorder) {
	defer close(r.done)
	defer func() { _ = r.root.Close() }()
	var timer <-chan time.Time
	for {
		select {
		case <-r.wake:
			if timer == nil {
				timer = time.After(recordDelay)
			}
		case <-timer:
			timer = nil
			if wait := a.flush(false); wait > 0 {
				timer = time.After(wait)
			}
		case <-r.stop:
			a.flush(true)
			return
		}
	}
}

// stopRecording writes what is left to write and stops the flusher.
func (a *Agent) stopRecording() {
	if a.rec == nil {
		return
	}
	close(a.rec.stop)
	<-a.rec.done
}

// runSnapshot is what flush took of a run under the mutex.
type runSnapshot struct {
	run       *cellRun
	notebook  string
	msgs      []*wire.Message
	count     *int
	execution map[string]any
	finished  bool
	truncated bool
	write     bool
}

// flush folds the runs' waiting messages and writes those of away clients; final writes
// those of clients within their grace too. It returns how long until a run in its grace may
// be written (0: none waits).
func (a *Agent) flush(final bool) time.Duration {
	r := a.rec
	now := time.Now()
	var wait time.Duration
	var snaps []runSnapshot
	a.mu.Lock()
	for _, run := range r.order {
		s := runSnapshot{run: run, notebook: run.notebook, msgs: run.pending, count: run.count, finished: run.finished, truncated: run.truncated}
		if run.dirty && run.sess.conn == nil {
			if away := now.Sub(run.sess.since); away >= awayGrace || final {
				s.write = true
				run.dirty = false
			} else if w := awayGrace - away; wait == 0 || w < wait {
				wait = w
			}
		}
		if len(s.msgs) == 0 && !s.write {
			continue
		}
		if run.execution != nil {
			s.execution = make(map[string]any, len(run.execution))
			for k, v := range run.execution {
				s.execution[k] = v
			}
		}
		run.pending = nil
		snaps = append(snaps, s)
	}
	a.mu.Unlock()

	byNotebook := map[string][]nbformat.CellRun{}
	var notebooks []string
	for _, s := range snaps {
		s.run.fold(s.msgs)
		if !s.write {
			continue
		}
		if _, ok := byNotebook[s.notebook]; !ok {
			notebooks = append(notebooks, s.notebook)
		}
		byNotebook[s.notebook] = append(byNotebook[s.notebook], s.run.cellRun(s))
	}
	for _, nb := range notebooks {
		written, err := writeRuns(r.root, nb, byNotebook[nb])
		if err != nil {
			a.cfg.Log.Info("Could not write the outputs of cells whose client is away", "notebook", nb, "error", err.Error())
		} else if len(written) > 0 {
			a.cfg.Log.V(1).Info("Wrote the outputs of cells whose client is away", "notebook", nb, "cells", written)
			a.mu.Lock()
			w := agentapi.OutputsWrite{At: time.Now().UTC(), Notebook: nb, Cells: len(written), Writes: 1}
			if a.outputsWritten != nil {
				w.Writes = a.outputsWritten.Writes + 1
			}
			a.outputsWritten = &w
			a.mu.Unlock()
		}
	}
	// A finished run that was written (or could not be) is done with; its outputs stay in
	// its session's replay for a client that comes back.
	a.mu.Lock()
	for _, s := range snaps {
		if s.write && s.finished && !s.run.gone && !s.run.dirty && len(s.run.pending) == 0 {
			a.forgetRunLocked(s.run)
		}
	}
	a.mu.Unlock()
	return wait
}

// writeRuns writes runs into the notebook nb under root, as the contents store saves: a new
// file synced and renamed over the old one (which keeps its checkpoints' links, and changes
// its entity tag, so that a page holding the old version is told on its next save). A save
// that lands between the read and the rename is not overwritten: the runs are applied to it.
func writeRuns(root *os.Root, nb string, runs []nbformat.CellRun) ([]string, error) {
	for range 5 {
		before, err := root.Stat(nb)
		if err != nil {
			return nil, err
		}
		data, err := root.ReadFile(nb)
		if err != nil {
			return nil, err
		}
		out, written, err := nbformat.PutRuns(data, runs)
		if err != nil || len(written) == 0 {
			return nil, err
		}
		dir := path.Dir(nb)
		tmp := path.Join(dir, outputTempPrefix+newID()+".tmp")
		if err := writeSynced(root, tmp, out, before.Mode().Perm()); err != nil {
			_ = root.Remove(tmp)
			return nil, err
		}
		if now, err := root.Stat(nb); err != nil || !sameVersion(before, now) {
			_ = root.Remove(tmp)
			continue
		}
		if err := root.Rename(tmp, nb); err != nil {
			_ = root.Remove(tmp)
			return nil, err
		}
		if d, err := root.Open(dir); err == nil {
			_ = d.Sync()
			d.Close()
		}
		return written, nil
	}
	return nil, errors.New("the notebook kept changing while its outputs were written")
}

func writeSynced(root *os.Root, name string, data []byte, perm os.FileMode) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	// The notebook's own mode, whatever the umask.
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sameVersion tells whether two stats are of the same version of a file, as the contents
// store's entity tags tell them apart.
func sameVersion(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
