package agent

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
)

// clientSession is one client's session: its live connection or, while it is away, the
// messages it missed.
type clientSession struct {
	id string
	// keep: the client named its session (session_id), so it may come back for what it
	// missed. Anonymous sessions end with their connection.
	keep bool
	conn *conn
	// buf holds what arrived while disconnected, oldest first.
	buf      []*wire.Message
	bufBytes int
	dropped  int
	since    time.Time
	// aliases are the route keys (header sessions) that lead here.
	aliases []string
}

// maxRoutes bounds the header sessions remembered for routing replies.
const maxRoutes = 4096

// untrackedParents are requests whose iopub traffic is not user activity: clients and the
// agent poll with them, and they must not keep an idle kernel from being culled.
var untrackedParents = map[string]bool{"kernel_info_request": true, "comm_info_request": true}

// recvLoop passes one channel's messages from the kernel on until the incarnation closes.
func (a *Agent) recvLoop(inc *incarnation, channel string) {
	sock := inc.sockets[channel]
	for {
		msg, err := sock.Recv()
		if err != nil {
			return
		}
		a.fromKernel(inc, channel, msg.Frames)
	}
}

// fromKernel routes one message from the kernel: replies of the agent's own requests to
// their waiter, iopub to every client, other replies to the client session that asked.
func (a *Agent) fromKernel(inc *incarnation, channel string, frames [][]byte) {
	m, err := wire.DecodeZMQ(frames, a.signer, wire.Limits{})
	if err != nil {
		if n := a.badSigs.Add(1); n <= 10 || n%1000 == 0 {
			a.cfg.Log.Info("Dropped a message from the kernel", "channel", channel, "error", err.Error(), "count", n)
		}
		return
	}
	m.Channel = channel
	if channel == wire.IOPub {
		inc.iopubSeenOnce.Do(func() { close(inc.iopubSeen) })
	}
	parent, _ := wire.ParseDecodedHeader(m.ParentHeader)
	a.mu.Lock()
	defer a.mu.Unlock()
	if channel != wire.IOPub {
		if parent.Session == a.session {
			if ch, ok := a.pending[parent.MsgID]; ok {
				delete(a.pending, parent.MsgID)
				select {
				case ch <- m:
				default:
				}
			}
			return
		}
		if a.rec != nil && a.rec.runs[parent.MsgID] != nil {
			h, _ := wire.ParseDecodedHeader(m.Header)
			a.recordLocked(m, h, parent)
		}
		if s := a.route[parent.Session]; s != nil {
			a.deliverLocked(s, m, wire.Header{}, &encodings{m: m})
		}
		return
	}
	h, _ := wire.ParseDecodedHeader(m.Header)
	inc.noteOutput(h.MsgType, time.Now())
	if !untrackedParents[parent.MsgType] {
		a.lastActivity = time.Now()
	}
	if h.MsgType == "status" && !a.hbDead {
		var st struct {
			ExecutionState string `json:"execution_state"`
		}
		if json.Unmarshal(m.Content, &st) == nil && st.ExecutionState != "" {
			a.state = st.ExecutionState
		}
	}
	a.recordLocked(m, h, parent)
	a.broadcastLocked(m, h)
}

// broadcastLocked sends an iopub message to every session.
func (a *Agent) broadcastLocked(m *wire.Message, h wire.Header) {
	enc := &encodings{m: m}
	for _, s := range a.sessions {
		a.deliverLocked(s, m, h, enc)
	}
}

// deliverLocked sends m to a session's connection, or keeps it for the session's return.
func (a *Agent) deliverLocked(s *clientSession, m *wire.Message, h wire.Header, enc *encodings) {
	if c := s.conn; c != nil {
		if c.only != "" && c.only != m.Channel {
			return
		}
		if m.Channel == wire.IOPub && c.limiter.drop(m, h, time.Now(), c.writeStderr) {
			return
		}
		typ, data, err := enc.get(c.proto)
		if err != nil {
			a.cfg.Log.Error(err, "Encode a message for a client")
			return
		}
		if c.enqueue(typ, data) {
			return
		}
		// Too far behind, or the budget is spent: the connection goes, the session keeps
		// what follows.
		a.cutOffLocked(c, "the client does not keep up with the kernel's output")
	}
	if !s.keep {
		return
	}
	size := messageSize(m)
	if size > a.cfg.Replay.Bytes {
		s.dropped++
		return
	}
	for len(s.buf) > 0 && (len(s.buf)+1 > a.cfg.Replay.Messages || s.bufBytes+size > a.cfg.Replay.Bytes) {
		a.dropFirstLocked(s)
	}
	// Past the budget, the oldest messages of whichever away session holds the most go
	// first, this one's included; a message that does not fit even so is dropped.
	if !a.reserveLocked(int64(size)) {
		s.dropped++
		return
	}
	s.buf = append(s.buf, m)
	s.bufBytes += size
}

func messageSize(m *wire.Message) int {
	size := len(m.Header) + len(m.ParentHeader) + len(m.Metadata) + len(m.Content)
	for _, b := range m.Buffers {
		size += len(b)
	}
	return size
}

// attach connects c to its session (a new one, or the one it names to get what it missed).
func (a *Agent) attach(c *conn, sessionID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	keep := sessionID != ""
	if !keep {
		sessionID = "anonymous-" + newID()
	}
	s := a.sessions[sessionID]
	if s == nil {
		s = &clientSession{id: sessionID, keep: keep}
		a.sessions[sessionID] = s
		a.addRouteLocked(s, sessionID)
	}
	if old := s.conn; old != nil {
		// The same session connecting again replaces a connection that has not noticed
		// it is gone, as Jupyter Server replaces a stale one.
		a.detachLocked(old)
		old.close(websocket.ClosePolicyViolation, "replaced by a new connection of the same session")
	}
	s.conn = c
	c.sess = s
	a.unusedSince = time.Time{}
	if len(s.buf) > 0 || s.dropped > 0 {
		a.cfg.Log.V(1).Info("Replaying messages to a returning session", "session", s.id, "messages", len(s.buf), "dropped", s.dropped)
	}
	// Each message's charge passes from the buffer to the connection's queue.
	for i, m := range s.buf {
		size := int64(messageSize(m))
		s.buf[i] = nil
		if c.only != "" && c.only != m.Channel {
			a.mem.release(size)
			continue
		}
		typ, data, err := (&encodings{m: m}).get(c.proto)
		if err != nil || !c.enqueueCharged(typ, data, size) {
			a.mem.release(size)
		}
	}
	s.buf, s.bufBytes, s.dropped = nil, 0, 0
}

// detach disconnects c from its session; a kept session starts collecting what it misses.
func (a *Agent) detach(c *conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.detachLocked(c)
}

func (a *Agent) detachLocked(c *conn) {
	s := c.sess
	if s == nil || s.conn != c {
		return
	}
	s.conn = nil
	s.since = time.Now()
	a.awayLocked(s)
	if !s.keep {
		a.dropSessionLocked(s)
		return
	}
	a.evictLocked()
}

// cutOffLocked ends c, whose client cannot be given or held more within the memory budget;
// its session, if kept, collects what follows and may come back for it.
func (a *Agent) cutOffLocked(c *conn, why string) {
	session := ""
	if c.sess != nil {
		session = c.sess.id
	}
	a.cfg.Log.Info("Cut off a client beyond the memory budget", "session", session, "reason", why,
		"memoryBytes", a.mem.used(), "budget", a.cfg.MemoryBudget)
	a.detachLocked(c)
	c.cutOff(why)
}

func (a *Agent) dropSessionLocked(s *clientSession) {
	a.releaseReplayLocked(s)
	delete(a.sessions, s.id)
	for _, r := range s.aliases {
		if a.route[r] == s {
			delete(a.route, r)
		}
	}
}

// addRouteLocked sends replies to key's requests to s; past maxRoutes new keys are not
// remembered (their replies are dropped, as for an unknown session).
func (a *Agent) addRouteLocked(s *clientSession, key string) {
	if cur, ok := a.route[key]; ok {
		if cur == s {
			return
		}
	} else if len(a.route) >= maxRoutes {
		return
	}
	a.route[key] = s
	s.aliases = append(s.aliases, key)
}

// evictLocked keeps the number and age of disconnected sessions within the limits.
func (a *Agent) evictLocked() {
	var oldest *clientSession
	waiting := 0
	for _, s := range a.sessions {
		if s.conn != nil {
			continue
		}
		if time.Since(s.since) > a.cfg.Replay.TTL {
			a.dropSessionLocked(s)
			continue
		}
		waiting++
		if oldest == nil || s.since.Before(oldest.since) {
			oldest = s
		}
	}
	if waiting > a.cfg.Replay.Sessions && oldest != nil {
		a.dropSessionLocked(oldest)
	}
}

// sweepSessions drops expired sessions now and then; it returns its stop function.
func (a *Agent) sweepSessions() func() {
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				a.mu.Lock()
				a.evictLocked()
				a.mu.Unlock()
			case <-stop:
				return
			}
		}
	}()
	return func() { close(stop) }
}

// toKernel sends one client message on to the kernel.
func (a *Agent) toKernel(c *conn, m *wire.Message) {
	channel := m.Channel
	if c.only != "" {
		channel = c.only
	}
	if channel == "" {
		channel = wire.Shell
	}
	if channel != wire.Shell && channel != wire.Control && channel != wire.Stdin {
		a.cfg.Log.V(1).Info("Ignored a client message on an unknown channel", "channel", channel)
		return
	}
	h, err := wire.ParseHeader(m.Header)
	if err != nil {
		a.cfg.Log.V(1).Info("Ignored a client message without a header", "error", err.Error())
		return
	}
	frames := wire.EncodeZMQ(&wire.Message{Header: m.Header, ParentHeader: m.ParentHeader, Metadata: m.Metadata,
		Content: m.Content, Buffers: m.Buffers}, a.signer)
	a.mu.Lock()
	if c.sess != nil && h.Session != "" {
		a.addRouteLocked(c.sess, h.Session)
	}
	if channel == wire.Shell && h.MsgType == "execute_request" {
		a.startRunLocked(c, h, m)
	}
	inc := a.inc
	if inc == nil {
		size := framesSize(frames)
		switch {
		case c.isClosing():
			// Cut off already: what it sends after is not held either.
		case len(a.held) >= maxHeld || !a.reserveLocked(size):
			// Holding more would take the kernel's memory; the client may send it again.
			a.cutOffLocked(c, "the kernel is starting and the agent holds all it can of what clients sent")
		default:
			a.held = append(a.held, heldMessage{channel: channel, frames: frames, size: size})
		}
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	if err := inc.send(channel, frames); err != nil {
		a.cfg.Log.Error(err, "Send a client message to the kernel", "channel", channel, "msgType", h.MsgType)
	}
}

// maxHeld bounds the number of client messages held while the kernel starts.
const maxHeld = 1024

func framesSize(frames [][]byte) int64 {
	var n int64
	for _, f := range frames {
		n += int64(len(f))
	}
	return n
}

// closeAll ends every client connection (the agent is stopping).
func (a *Agent) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sessions {
		if s.conn != nil {
			s.conn.close(websocket.CloseGoingAway, "the kernel was shut down")
		}
	}
}

// heartbeatEchoes reads the kernel's heartbeat echoes until the incarnation's sockets close.
// It starts before the kernel is reported ready, so that everything an incarnation runs
// exists by then.
func heartbeatEchoes(inc *incarnation) <-chan string {
	echoes := make(chan string, 16)
	go func() {
		sock := inc.sockets[channelHB]
		for {
			msg, err := sock.Recv()
			if err != nil {
				return
			}
			if len(msg.Frames) > 0 {
				select {
				case echoes <- string(msg.Frames[len(msg.Frames)-1]):
				default:
				}
			}
		}
	}()
	return echoes
}

// heartbeat checks that the kernel answers; three missed beats in a row report it dead,
// an answer after that brings it back.
func (a *Agent) heartbeat(inc *incarnation, echoes <-chan string) {
	interval := a.cfg.HeartbeatInterval
	misses := 0
	for n := 0; ; n++ {
		select {
		case <-inc.ctx.Done():
			return
		case <-time.After(interval):
		}
		ping := "nbkube-" + strconv.Itoa(n)
		if err := inc.send(channelHB, [][]byte{[]byte(ping)}); err != nil {
			return
		}
		if waitEcho(inc, echoes, ping, interval) {
			if misses >= 3 {
				a.cfg.Log.Info("Kernel answers its heartbeat again", "kernel", a.cfg.KernelID)
				a.mu.Lock()
				a.hbDead = false
				a.state = agentapi.ExecutionIdle
				a.mu.Unlock()
			}
			misses = 0
			continue
		}
		if inc.ctx.Err() != nil {
			return
		}
		misses++
		if misses == 3 {
			a.cfg.Log.Info("Kernel stopped answering its heartbeat", "kernel", a.cfg.KernelID)
			a.mu.Lock()
			a.hbDead = true
			a.mu.Unlock()
			// Reported (status, the Kernel resource), not broadcast: clients such as
			// JupyterLab give a kernel up for good on a "dead" status, and a kernel that is
			// only slow comes back.
			a.setState(agentapi.ExecutionDead, false)
		}
	}
}

// waitEcho waits for the echo of ping; older echoes that arrive late are passed over.
func waitEcho(inc *incarnation, echoes <-chan string, ping string, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case e := <-echoes:
			if e == ping {
				return true
			}
		case <-t.C:
			return false
		case <-inc.ctx.Done():
			return false
		}
	}
}
