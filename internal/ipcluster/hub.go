package ipcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
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

// replyLimits bound a hub's reply: a few hundred bytes per engine.
var replyLimits = wire.Limits{MaxFrames: 16, MaxBytes: 4 << 20}

// ErrHub is matched (errors.Is) by the errors a hub answered with, and by replies that are
// not what a hub sends (a wrong key shows as a bad signature).
var ErrHub = errors.New("ipcontroller hub")

// QueryHub asks the hub at addr (host:port of its registration port) which engines are
// registered (connection_request) and what their queues hold (queue_request), as
// ipyparallel's Client does. Engines the queue status still lists after they left are not
// reported. The call is bounded by ctx; nothing it starts outlives it.
func QueryHub(ctx context.Context, addr string, key []byte) (HubStatus, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sock := zmq4.NewDealer(ctx, zmq4.WithDialerRetry(100*time.Millisecond), zmq4.WithDialerMaxRetries(2),
		zmq4.WithDialerTimeout(2*time.Second))
	var once sync.Once
	closeSock := func() { once.Do(func() { _ = sock.Close() }) }
	defer closeSock()
	// Recv does not watch the context: closing the socket ends it.
	defer context.AfterFunc(ctx, closeSock)()
	if err := sock.Dial("tcp://" + addr); err != nil {
		return HubStatus{}, fmt.Errorf("connect to hub %s: %w", addr, err)
	}
	q := query{sock: sock, signer: wire.NewSigner(key), session: randomID()}

	var conn struct {
		Engines map[string]string `json:"engines"`
	}
	if err := q.ask(ctx, "connection_request", `{}`, "connection_reply", &conn); err != nil {
		return HubStatus{}, err
	}
	var queues map[string]json.RawMessage
	if err := q.ask(ctx, "queue_request", `{"targets":null,"verbose":false}`, "queue_reply", &queues); err != nil {
		return HubStatus{}, err
	}
	var st HubStatus
	for id, uuid := range conn.Engines {
		n, err := strconv.Atoi(id)
		if err != nil {
			return HubStatus{}, fmt.Errorf("%w: engine id %q", ErrHub, id)
		}
		e := Engine{ID: n, UUID: uuid}
		if raw, ok := queues[id]; ok {
			var counts struct{ Queue, Tasks, Completed int }
			if err := json.Unmarshal(raw, &counts); err != nil {
				return HubStatus{}, fmt.Errorf("%w: queue of engine %s: %w", ErrHub, id, err)
			}
			e.Queue, e.Tasks, e.Completed = counts.Queue, counts.Tasks, counts.Completed
		}
		st.Engines = append(st.Engines, e)
	}
	slices.SortFunc(st.Engines, func(a, b Engine) int { return a.ID - b.ID })
	if raw, ok := queues["unassigned"]; ok {
		if err := json.Unmarshal(raw, &st.Unassigned); err != nil {
			return HubStatus{}, fmt.Errorf("%w: unassigned: %w", ErrHub, err)
		}
	}
	return st, nil
}

type query struct {
	sock    zmq4.Socket
	signer  *wire.Signer
	session string
}

// ask sends one request and decodes the content of its reply into out.
func (q query) ask(ctx context.Context, msgType, content, replyType string, out any) error {
	id := randomID()
	header, err := json.Marshal(wire.Header{MsgID: id, MsgType: msgType, Session: q.session, Username: "nbkube",
		Date: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), Version: "5.3"})
	if err != nil {
		return err
	}
	frames := wire.EncodeZMQ(&wire.Message{Header: header, Content: json.RawMessage(content)}, q.signer)
	if err := q.sock.Send(zmq4.NewMsgFrom(frames...)); err != nil {
		return fmt.Errorf("send %s: %w", msgType, ctxErr(ctx, err))
	}
	for {
		msg, err := q.sock.Recv()
		if err != nil {
			return fmt.Errorf("wait for %s: %w", replyType, ctxErr(ctx, err))
		}
		m, err := wire.DecodeZMQ(msg.Frames, q.signer, replyLimits)
		if errors.Is(err, wire.ErrBadSignature) {
			return fmt.Errorf("%w: reply to %s has a bad signature (another key?)", ErrHub, msgType)
		} else if err != nil {
			return fmt.Errorf("%w: reply to %s: %w", ErrHub, msgType, err)
		}
		parent, err := wire.ParseHeader(m.ParentHeader)
		if err != nil || parent.MsgID != id {
			continue // a late answer to an earlier request
		}
		h, err := wire.ParseHeader(m.Header)
		if err != nil {
			return fmt.Errorf("%w: reply to %s: %w", ErrHub, msgType, err)
		}
		var status struct {
			Status string `json:"status"`
			EName  string `json:"ename"`
			EValue string `json:"evalue"`
		}
		if err := json.Unmarshal(m.Content, &status); err != nil {
			return fmt.Errorf("%w: reply to %s: %w", ErrHub, msgType, err)
		}
		if h.MsgType != replyType || status.Status != "ok" {
			return fmt.Errorf("%w: %s answered %s %s: %s %s", ErrHub, msgType, h.MsgType, status.Status, status.EName, status.EValue)
		}
		if err := json.Unmarshal(m.Content, out); err != nil {
			return fmt.Errorf("%w: reply to %s: %w", ErrHub, msgType, err)
		}
		return nil
	}
}

// ctxErr prefers the context's reason over the error of the socket it closed.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}

func randomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
