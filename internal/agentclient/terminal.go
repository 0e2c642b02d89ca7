package agentclient

import (
	"context"
	"net"
	"net/http"

	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentapi"
)

// The agent of a terminal pod (agentapi.CommandTerminal) takes the same token and serves
// PathShutdown as a kernel's does: Shutdown ends its shell.

// TerminalStatus reports when the terminal was last used and how many clients it has.
func (c *Client) TerminalStatus(ctx context.Context, e Endpoint) (agentapi.TerminalStatus, error) {
	var st agentapi.TerminalStatus
	return st, c.do(ctx, e, http.MethodGet, agentapi.PathStatus, nil, &st)
}

// DialTerminal opens the terminal's WebSocket, which speaks terminado's JSON messages; wrap,
// when set, wraps the network connection under it.
func (c *Client) DialTerminal(ctx context.Context, e Endpoint, wrap func(net.Conn) net.Conn) (*websocket.Conn, error) {
	return c.dial(ctx, e, agentapi.PathTerminal, "terminal", nil, wrap)
}
