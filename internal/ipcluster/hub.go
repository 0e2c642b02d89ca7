package ipcluster

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/nbkube/nbkube/internal/wire"
)

// Engine is one engine registered with a hub.
type Engine struct {
	// ID is the engine's number, ipyparallel's engine id.
	ID int
	// UUID is the name the engine registered under (`ipengine --ident`).
	UUID string
	// Queue and Tasks are its outstanding direct and load-balanced tasks; Completed the tasks
	// it finished.
	Queue, Tasks, Completed int
}

// HubStatus is what a hub says of its engines.
type HubStatus struct {
	// Engines are the registered engines, by ID.
	Engines []Engine
	// Unassigned counts load-balanced tasks no engine has taken yet.
	Unassigned int
}

// replyLimits bound each reply: a few hundred bytes per engine.
var replyLimits = wire.Limits{MaxFrames: 16, MaxBytes: maxReplyBytes}

// ErrHub is matched (errors.Is) by the errors a hub answered with (hub_error), and by what a
// hub would not send: a reply unsigned or signed with another key, malformed, or too large.
var ErrHub = errors.New("ipcontroller hub")

// QueryHub asks the hub at addr (host:port of its registration port) which engines are
// registered (connection_request) and what their queues hold (queue_request), as
// ipyparallel's Client does. Engines the queue status still lists after they left are not
// reported. The call is bounded by ctx, and nothing it starts outlives it.
//
// A request signed with another key gets no answer from ipyparallel 7.1 (docs/ipyparallel.md
// §6): a wrong key shows as ctx's error.
func QueryHub(ctx context.Context, addr string, key []byte) (HubStatus, error) {
	// Cancelling the socket's context ends its dial, sends and receives, and its connection
	// (see hubScheme).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q, err := dialHub(ctx, addr, key)
	if err != nil {
		return HubStatus{}, err
	}
	defer q.close()
	conn, err := q.ask(ctx, "connection_request", `{}`, "connection_reply")
	if err != nil {
		return HubStatus{}, err
	}
	queues, err := q.ask(ctx, "queue_request", `{"targets":null,"verbose":false}`, "queue_reply")
	if err != nil {
		return HubStatus{}, err
	}
	return parseStatus(conn, queues)
}

// parseStatus merges a connection_reply's engines with a queue_reply's counts. The queue
// reply covers every engine that ever registered (the hub never forgets an id) and so every
// engine of the connection reply, which was asked first.
func parseStatus(connReply, queueReply json.RawMessage) (HubStatus, error) {
	var conn struct {
		Engines map[string]string `json:"engines"`
	}
	if err := json.Unmarshal(connReply, &conn); err != nil {
		return HubStatus{}, fmt.Errorf("%w: connection_reply: %w", ErrHub, err)
	}
	if conn.Engines == nil {
		return HubStatus{}, fmt.Errorf("%w: connection_reply without engines", ErrHub)
	}
	var queues map[string]json.RawMessage
	if err := json.Unmarshal(queueReply, &queues); err != nil {
		return HubStatus{}, fmt.Errorf("%w: queue_reply: %w", ErrHub, err)
	}
	st := HubStatus{Engines: make([]Engine, 0, len(conn.Engines))}
	for id, uuid := range conn.Engines {
		n, err := strconv.Atoi(id)
		if err != nil || n < 0 || strconv.Itoa(n) != id {
			return HubStatus{}, fmt.Errorf("%w: engine id %q", ErrHub, id)
		}
		raw, ok := queues[id]
		if !ok {
			return HubStatus{}, fmt.Errorf("%w: queue_reply lacks engine %s", ErrHub, id)
		}
		var counts struct{ Queue, Tasks, Completed int }
		if err := json.Unmarshal(raw, &counts); err != nil {
			return HubStatus{}, fmt.Errorf("%w: queue of engine %s: %w", ErrHub, id, err)
		}
		if counts.Queue < 0 || counts.Tasks < 0 || counts.Completed < 0 {
			return HubStatus{}, fmt.Errorf("%w: queue of engine %s: negative counts %s", ErrHub, id, raw)
		}
		st.Engines = append(st.Engines, Engine{ID: n, UUID: uuid, Queue: counts.Queue, Tasks: counts.Tasks, Completed: counts.Completed})
	}
	slices.SortFunc(st.Engines, func(a, b Engine) int { return cmp.Compare(a.ID, b.ID) })
	raw, ok := queues["unassigned"]
	if !ok {
		return HubStatus{}, fmt.Errorf("%w: queue_reply without unassigned", ErrHub)
	}
	if err := json.Unmarshal(raw, &st.Unassigned); err != nil {
		return HubStatus{}, fmt.Errorf("%w: unassigned: %w", ErrHub, err)
	}
	if st.Unassigned < 0 {
		return HubStatus{}, fmt.Errorf("%w: unassigned %d", ErrHub, st.Unassigned)
	}
	return st, nil
}

// query is a connection to a hub's query socket, which takes any peer as a client.
type query struct {
	sock    zmq4.Socket
	signer  *wire.Signer
	session string
}

func dialHub(ctx context.Context, addr string, key []byte) (query, error) {
	// One attempt: callers poll, and ask again.
	sock := zmq4.NewDealer(ctx, zmq4.WithDialerMaxRetries(0))
	if err := sock.Dial(hubScheme + "://" + addr); err != nil {
		_ = sock.Close()
		return query{}, fmt.Errorf("connect to hub %s: %w", addr, ctxErr(ctx, err))
	}
	return query{sock: sock, signer: wire.NewSigner(key), session: randomID()}, nil
}

func (q query) close() { _ = q.sock.Close() }

// ask sends one request and returns the content of its reply.
func (q query) ask(ctx context.Context, msgType, content, replyType string) (json.RawMessage, error) {
	id := randomID()
	header, err := json.Marshal(wire.Header{MsgID: id, MsgType: msgType, Session: q.session, Username: "nbkube",
		Date: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), Version: "5.3"})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", msgType, err)
	}
	frames := wire.EncodeZMQ(&wire.Message{Header: header, Content: json.RawMessage(content)}, q.signer)
	if err := q.sock.Send(zmq4.NewMsgFrom(frames...)); err != nil {
		return nil, fmt.Errorf("send %s: %w", msgType, ctxErr(ctx, err))
	}
	for {
		msg, err := q.sock.Recv()
		if err != nil {
			return nil, fmt.Errorf("wait for %s: %w", replyType, ctxErr(ctx, err))
		}
		reply, other, err := decodeReply(msg.Frames, q.signer, id, replyType)
		if err != nil {
			return nil, fmt.Errorf("reply to %s: %w", msgType, err)
		}
		if !other {
			return reply, nil
		}
	}
}

// decodeReply returns the content of the reply of type replyType to the request id in frames;
// other is true for a message that answers another request. A hub_error, or any status but
// "ok", is an error.
func decodeReply(frames [][]byte, signer *wire.Signer, id, replyType string) (content json.RawMessage, other bool, err error) {
	m, err := wire.DecodeZMQ(frames, signer, replyLimits)
	if errors.Is(err, wire.ErrBadSignature) {
		return nil, false, fmt.Errorf("%w: bad signature (another key?)", ErrHub)
	} else if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrHub, err)
	}
	parent, err := wire.ParseHeader(m.ParentHeader)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrHub, err)
	}
	if parent.MsgID != id {
		return nil, true, nil
	}
	h, err := wire.ParseHeader(m.Header)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrHub, err)
	}
	// hub_error carries ipyparallel's wrap_exception: status "error", ename, evalue.
	var status struct {
		Status string `json:"status"`
		EName  string `json:"ename"`
		EValue string `json:"evalue"`
	}
	if err := json.Unmarshal(m.Content, &status); err != nil {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrHub, h.MsgType, err)
	}
	if h.MsgType != replyType || status.Status != "ok" {
		return nil, false, fmt.Errorf("%w: answered %s, status %q: %s: %s", ErrHub, h.MsgType, status.Status, status.EName, status.EValue)
	}
	return m.Content, false, nil
}

// ctxErr prefers the context's reason over the error of the socket it closed.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	return err
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
