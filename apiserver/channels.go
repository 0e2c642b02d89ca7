package apiserver

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentclient"
)

// RateLimits are Jupyter Server's iopub limits, applied by the agent to each connection.
type RateLimits struct {
	// MsgRate is iopub_msg_rate_limit (messages/s), DataRate iopub_data_rate_limit (bytes/s),
	// Window rate_limit_window (s). Zero disables a limit.
	MsgRate, DataRate, Window float64
}

// DefaultRateLimits are Jupyter Server's defaults.
var DefaultRateLimits = RateLimits{MsgRate: 1000, DataRate: 1_000_000, Window: 3}

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
func (s *Server) kernelChannels(c *gin.Context) {
	s.proxyChannels(c, "")
}

// proxyChannels connects a client WebSocket to the kernel's agent; only, when set, makes a
// single-channel connection (the older interface's /kernels/<id>/shell and so on).
func (s *Server) proxyChannels(c *gin.Context, only string) {
	if !websocket.IsWebSocketUpgrade(c.Request) {
		abortJSON(c, http.StatusBadRequest, "a WebSocket upgrade is required", nil)
		return
	}
	ks, err := s.kernels()
	if err != nil {
		s.abortErr(c, err)
		return
	}
	ep, err := ks.Endpoint(c.Request.Context(), *userOf(c), c.Param("id"))
	if err != nil {
		s.abortErr(c, err)
		return
	}
	limits := *s.opts.RateLimits
	dialCtx, cancel := context.WithTimeout(c.Request.Context(), 15*time.Second)
	defer cancel()
	upstream, err := s.agents.DialChannels(dialCtx, ep, agentclient.ChannelOptions{
		SessionID:    c.Query("session_id"),
		Channel:      only,
		Subprotocols: websocket.Subprotocols(c.Request),
		MsgRateLimit: limits.MsgRate, DataRateLimit: limits.DataRate, RateLimitWindow: limits.Window,
	})
	if err != nil {
		if errors.Is(err, agentclient.ErrUnreachable) {
			s.opts.Log.V(1).Info("Kernel agent unreachable", "kernel", c.Param("id"), "error", err.Error())
			abortJSON(c, http.StatusServiceUnavailable, "the kernel is not reachable", nil)
			return
		}
		s.abortErr(c, err)
		return
	}
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
	client, err := up.Upgrade(c.Writer, c.Request, nil)
	if err != nil {
		_ = upstream.Close()
		return
	}
	relay(client, upstream)
}

// relay copies messages both ways until either side closes, then closes the other with the
// same code. The client is pinged every 30 s; each direction has one writer.
func relay(client, upstream *websocket.Conn) {
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
			typ, data, err := client.ReadMessage()
			if err != nil {
				closeWith(upstream, nil, err)
				return
			}
			_ = client.SetReadDeadline(time.Now().Add(proxyReadWait))
			_ = upstream.SetWriteDeadline(time.Now().Add(proxyWriteWait))
			if err := upstream.WriteMessage(typ, data); err != nil {
				return
			}
		}
	}()
	go func() { // agent → client
		defer wg.Done()
		defer finish()
		for {
			typ, data, err := upstream.ReadMessage()
			if err != nil {
				closeWith(client, &clientWrite, err)
				return
			}
			clientWrite.Lock()
			_ = client.SetWriteDeadline(time.Now().Add(proxyWriteWait))
			err = client.WriteMessage(typ, data)
			clientWrite.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() { // pings
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
