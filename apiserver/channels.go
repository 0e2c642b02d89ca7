package apiserver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/wsbatch"
)

// Timing of the channel proxy.
const (
	proxyPingPeriod = 30 * time.Second
	proxyWriteWait  = 30 * time.Second
	proxyReadWait   = 3 * proxyPingPeriod
	// proxyMaxMessage bounds one message from a client.
	proxyMaxMessage = 256 << 20
)

// kernelChannels is WS /api/kernels/<id>/channels: the kernel's channels, proxied to its
// agent, which speaks Jupyter's protocol. The subprotocol the client offers is offered to
// the agent, and the one the agent picks is the client's.
func (s *Server) kernelChannels(c *gin.Context) error {
	return s.proxyChannels(c, "")
}

// proxyChannels connects a client WebSocket to the kernel's agent; only, when set, makes a
// single-channel connection (the older interface's /kernels/<id>/shell and so on).
func (s *Server) proxyChannels(c *gin.Context, only string) error {
	if !websocket.IsWebSocketUpgrade(c.Request) {
		return domainerr.Invalid("a WebSocket upgrade is required")
	}
	ep, err := s.opts.Kernels.Endpoint(c.Request.Context(), *userOf(c), c.Param("id"))
	if err != nil {
		return err
	}
	dialCtx, cancel := context.WithTimeout(c.Request.Context(), agentDialWait)
	defer cancel()
	var fromAgent agentConn
	upstream, err := s.agents.DialChannels(dialCtx, ep, agentclient.ChannelOptions{
		SessionID:    c.Query("session_id"),
		Channel:      only,
		Notebook:     s.opts.Sessions.NotebookOf(c.Request.Context(), *userOf(c), c.Param("id")),
		Subprotocols: websocket.Subprotocols(c.Request),
		RateLimits:   s.opts.RateLimits,
		WrapConn:     fromAgent.wrap,
	})
	if err != nil {
		return err
	}
	s.relayFromAgent(c, upstream, fromAgent.conn)
	return nil
}

// agentDialWait bounds the dial of an agent's WebSocket, its handshake included.
const agentDialWait = 15 * time.Second

// agentConn is the network connection under a WebSocket to an agent. What one read from the
// agent brings goes to the client in one write: the client side is held while the relay
// works through the agent side's buffer, and flushed before the relay reads (and maybe
// waits) again.
type agentConn struct{ conn *wsbatch.FlushBeforeRead }

// wrap is the dial's WrapConn.
func (a *agentConn) wrap(nc net.Conn) net.Conn {
	a.conn = &wsbatch.FlushBeforeRead{Conn: nc}
	return a.conn
}

// relayFromAgent upgrades the client's connection, with the subprotocol the agent picked,
// and relays it to upstream, an agent's WebSocket dialled through fromAgent (see agentConn),
// until either side closes or the client's credentials are revoked.
func (s *Server) relayFromAgent(c *gin.Context, upstream *websocket.Conn, fromAgent *wsbatch.FlushBeforeRead) {
	up := websocket.Upgrader{
		ReadBufferSize:  64 << 10,
		WriteBufferSize: 64 << 10,
		// authenticate has checked the origin of cookie-authenticated requests; a token
		// request may come from anywhere, as in Jupyter.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	if p := upstream.Subprotocol(); p != "" {
		up.Subprotocols = []string{p}
	}
	hw := wsbatch.NewHijacker(c.Writer)
	client, err := up.Upgrade(hw, c.Request, nil)
	if err != nil {
		// The upgrader has answered the client.
		_ = upstream.Close()
		return
	}
	if fromAgent != nil {
		fromAgent.SetTarget(hw.Conn())
	}
	// The connection outlives the login that opened it: a connection per kernel tab stays
	// open for days. Each connection re-checks its own user rather than a registry of
	// connections by user: replicas share nothing, and providers need not announce removals.
	watchCtx, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	revoked := s.auth.watchRevocation(watchCtx, *proofOf(c), func(err error) {
		s.opts.Log.V(1).Info("Cannot re-validate a WebSocket connection's user", "path", c.Request.URL.Path, "error", err.Error())
	})
	relay(client, upstream, revoked)
}

// relay copies messages both ways until either side closes, then closes the other with the
// same code. The client is pinged every 30 s; each direction has one writer. When revoked
// closes, the client is told so (policy violation) and both sides are closed.
func relay(client, upstream *websocket.Conn, revoked <-chan struct{}) {
	client.SetReadLimit(proxyMaxMessage)
	upstream.SetReadLimit(proxyMaxMessage)
	_ = client.SetReadDeadline(time.Now().Add(proxyReadWait))
	client.SetPongHandler(func(string) error { return client.SetReadDeadline(time.Now().Add(proxyReadWait)) })

	var clientWrite sync.Mutex // the pinger and the upstream→client copier both write
	done := make(chan struct{})
	var once sync.Once
	finish := func() { once.Do(func() { close(done) }) }
	closeWith := func(dst *websocket.Conn, mu *sync.Mutex, err error) {
		code, text := websocket.CloseGoingAway, ""
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			code, text = ce.Code, ce.Text
			if code == websocket.CloseNoStatusReceived || code == websocket.CloseAbnormalClosure {
				code = websocket.CloseGoingAway
			}
		}
		if mu != nil {
			mu.Lock()
			defer mu.Unlock()
		}
		_ = dst.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
	}

	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // client → agent
		defer wg.Done()
		defer finish()
		for {
			typ, r, err := client.NextReader()
			if err != nil {
				closeWith(upstream, nil, err)
				return
			}
			_ = client.SetReadDeadline(time.Now().Add(proxyReadWait))
			_ = upstream.SetWriteDeadline(time.Now().Add(proxyWriteWait))
			if fromSrc, err := copyMessage(upstream, typ, r); err != nil {
				if fromSrc {
					closeWith(upstream, nil, err)
				}
				return
			}
		}
	}()
	go func() { // agent → client
		defer wg.Done()
		defer finish()
		for {
			typ, r, err := upstream.NextReader()
			if err != nil {
				closeWith(client, &clientWrite, err)
				return
			}
			clientWrite.Lock()
			_ = client.SetWriteDeadline(time.Now().Add(proxyWriteWait))
			fromSrc, err := copyMessage(client, typ, r)
			clientWrite.Unlock()
			if err != nil {
				if fromSrc {
					closeWith(client, &clientWrite, err)
				}
				return
			}
		}
	}()
	go func() { // pings, and revocation
		defer wg.Done()
		t := time.NewTicker(proxyPingPeriod)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				clientWrite.Lock()
				err := client.WriteControl(websocket.PingMessage, nil, time.Now().Add(proxyWriteWait))
				clientWrite.Unlock()
				if err != nil {
					finish()
					return
				}
			case <-revoked:
				closeWith(client, &clientWrite, &websocket.CloseError{Code: websocket.ClosePolicyViolation, Text: "credentials revoked"})
				closeWith(upstream, nil, nil)
				finish()
				return
			case <-done:
				return
			}
		}
	}()
	<-done
	// Either side ended: closing both ends the other copier's read.
	_ = client.Close()
	_ = upstream.Close()
	wg.Wait()
}

// copyMessage writes the message that r reads to dst as it arrives, straight from one
// connection's buffer into the other's: reading whole messages first would allocate for
// each one, and outputs can be large. fromSrc tells that the error came from reading r.
func copyMessage(dst *websocket.Conn, typ int, r io.Reader) (fromSrc bool, err error) {
	w, err := dst.NextWriter(typ)
	if err != nil {
		return false, err
	}
	if _, err := io.Copy(w, srcReader{r}); err != nil {
		// Not closed: a message cut short is never completed (the relay sends a close
		// frame next), rather than delivered truncated.
		var re readError
		if errors.As(err, &re) {
			return true, re.err
		}
		return false, err
	}
	return false, w.Close()
}

// srcReader marks the errors of the reading side of a copy.
type srcReader struct{ r io.Reader }

func (s srcReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = readError{err}
	}
	return n, err
}

type readError struct{ err error }

func (e readError) Error() string { return e.err.Error() }
func (e readError) Unwrap() error { return e.err }
