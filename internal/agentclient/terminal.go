package agentclient

import (
	"context"
	"net/http"

	"github.com/nbkube/nbkube/internal/agentapi"
)

// TerminalStatus reports a terminal agent's last activity and connections.
func (c *Client) TerminalStatus(ctx context.Context, e Endpoint) (agentapi.TerminalStatus, error) {
	var st agentapi.TerminalStatus
	return st, c.do(ctx, e, http.MethodGet, agentapi.PathStatus, nil, &st)
}
