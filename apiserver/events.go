package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/events"
)

// The event bus, Jupyter Server 2's (internal/events): POST /api/events emits a client's
// event of a registered schema, WS /api/events/subscribe streams events as they happen. The
// server emits kernel_actions (a kernel's start, interrupt, restart and shutdown) and
// contents_service (what was done to which path) as Jupyter Server does. A user's events are
// about their resources (or posted by them); a user's subscription gets their own, an admin's
// everyone's.

// maxEventBytes bounds a posted event.
const maxEventBytes = 64 << 10

// postedEvent is the body of POST /api/events.
type postedEvent struct {
	SchemaID  string         `json:"schema_id"`
	Version   json.Number    `json:"version"`
	Data      map[string]any `json:"data"`
	Timestamp *time.Time     `json:"timestamp"`
}

// postEvent is POST /api/events: 204 once the event is passed on; 400 for an event of no
// registered schema, or one its schema refuses.
func (s *Server) postEvent(c *gin.Context) error {
	var ev postedEvent
	if err := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, maxEventBytes)).Decode(&ev); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return domainerr.Invalid("The body must be an event {schema_id, version, data}: %v", err)
	}
	if ev.SchemaID == "" || ev.Version == "" || ev.Data == nil {
		return domainerr.Invalid("An event needs its schema_id, version and data")
	}
	version, err := ev.Version.Int64()
	if err != nil || version < 1 || version > 1<<20 {
		return domainerr.Invalid("The version %s is no schema version", ev.Version)
	}
	if err := events.Validate(ev.SchemaID, int(version), ev.Data); err != nil {
		return domainerr.Invalid("%v", err)
	}
	e := events.Event{SchemaID: ev.SchemaID, Version: int(version), Data: ev.Data, Owner: userOf(c).Name}
	if ev.Timestamp != nil {
		e.Timestamp = *ev.Timestamp
	}
	s.events.Publish(e)
	c.Status(http.StatusNoContent)
	return nil
}

// eventsPing is how often a subscription is pinged; a client that answers no ping for twice
// that long is gone.
const eventsPing = 30 * time.Second

// subscribeEvents is WS /api/events/subscribe: one JSON text message per event the user may
// see, until either side closes or the user's credentials are revoked.
func (s *Server) subscribeEvents(c *gin.Context) error {
	if !websocket.IsWebSocketUpgrade(c.Request) {
		return domainerr.Invalid("a WebSocket upgrade is required")
	}
	u := *userOf(c)
	// authenticate has checked the origin of cookie-authenticated requests; a token request
	// may come from anywhere, as in Jupyter.
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	// Subscribed, and linked to the other replicas, before the upgrade is answered: a
	// client that acts as soon as it is connected hears what its action causes.
	sub := s.events.Subscribe(u.Owns)
	defer sub.Close()
	if s.peers != nil {
		release := s.peers.acquire(c.Request.Context())
		defer release()
	}
	ws, err := up.Upgrade(c.Writer, c.Request, nil)
	if err != nil {
		// The upgrader has answered the client.
		return nil
	}
	defer func() { _ = ws.Close() }()

	watchCtx, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	revoked := s.auth.watchRevocation(watchCtx, *proofOf(c), func(err error) {
		s.opts.Log.V(1).Info("Cannot re-validate an events subscription's user", "error", err.Error())
	})
	s.streamEvents(ws, sub, revoked, func(e events.Event) any { return e })
	return nil
}

// streamEvents writes what sub gets to ws, as encode makes each event, pinging the client,
// until either side closes or revoked is closed.
func (s *Server) streamEvents(ws *websocket.Conn, sub *events.Subscription, revoked <-chan struct{}, encode func(events.Event) any) {
	// The client sends nothing but pongs and its close; reading is how both are seen.
	gone := make(chan struct{})
	ws.SetReadLimit(4 << 10)
	_ = ws.SetReadDeadline(time.Now().Add(2 * eventsPing))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(2 * eventsPing)) })
	go func() {
		defer close(gone)
		for {
			if _, _, err := ws.NextReader(); err != nil {
				return
			}
		}
	}()
	ping := time.NewTicker(eventsPing)
	defer ping.Stop()
	for {
		select {
		case e := <-sub.C:
			_ = ws.SetWriteDeadline(time.Now().Add(proxyWriteWait))
			if err := ws.WriteJSON(encode(e)); err != nil {
				return
			}
		case <-ping.C:
			if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(proxyWriteWait)); err != nil {
				return
			}
		case <-revoked:
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "credentials revoked"), time.Now().Add(time.Second))
			return
		case <-gone:
			return
		}
	}
}

// emit passes on an event of the server about owner's resource. An event its own schema
// refuses is the server's fault: logged, never the request's.
func (s *Server) emit(owner, schemaID string, data map[string]any) {
	s.eventFault(s.events.Emit(owner, schemaID, data), schemaID)
}

// eventFault logs the error of emitting an event of the server, if any.
func (s *Server) eventFault(err error, schemaID string) {
	if err != nil {
		s.opts.Log.Error(err, "An event of the server does not fit its schema", "schema", schemaID)
	}
}

// emitContents emits a contents_service event of the request's user; source is the path a
// rename or copy came from ("" for none).
func (s *Server) emitContents(c *gin.Context, action, path, source string) {
	data := map[string]any{"action": action, "path": path}
	if source != "" {
		data["source_path"] = source
	}
	s.emit(userOf(c).Name, events.ContentsService, data)
}

// emitKernel emits a kernel_actions event: how action on a kernel of owner went (err nil for
// success).
func (s *Server) emitKernel(owner, action, kernelID, kernelName string, err error) {
	data := map[string]any{"action": action, "kernel_id": kernelID, "status": "success"}
	if kernelName != "" {
		data["kernel_name"] = kernelName
	}
	if err == nil {
		data["msg"] = "Kernel " + action + " succeeded"
		data["status_code"] = http.StatusOK
	} else {
		status, body, _ := answerTo(err)
		data["status"] = "error"
		data["status_code"] = status
		data["msg"] = body.Message
	}
	s.emit(owner, events.KernelActions, data)
}
