package apiserver

import (
	"context"
	"errors"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gorilla/websocket"

	"github.com/nbkube/nbkube/internal/agentclient"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
)

// TerminalService runs the users' terminals (Terminal resources and their agents).
type TerminalService interface {
	ListTerminals(ctx context.Context, u User) ([]jupyter.Terminal, error)
	GetTerminal(ctx context.Context, u User, name string) (jupyter.Terminal, error)
	// StartTerminal makes a terminal, or answers the user's terminal of the name asked for.
	StartTerminal(ctx context.Context, u User, start repository.TerminalStart) (jupyter.Terminal, error)
	DeleteTerminal(ctx context.Context, u User, name string) error
	// TerminalEndpoint is where the terminal's agent serves it, once it runs; a
	// *repository.TerminalEnded when it has ended.
	TerminalEndpoint(ctx context.Context, u User, name string) (agentclient.Endpoint, error)
}

// terminalSocketRoute is the terminal's WebSocket, under the base URL: Jupyter's address,
// outside /api.
const terminalSocketRoute = "terminals/websocket/:name"

// terminalsOn answers the terminal routes of a server without terminals as Jupyter Server
// answers them without its terminals extension: there is nothing there.
func (s *Server) terminalsOn(c *gin.Context) {
	if s.opts.Terminals == nil {
		s.abortErr(c, errNotFound)
	}
}

// listTerminals is GET /api/terminals.
func (s *Server) listTerminals(c *gin.Context) error {
	list, err := s.opts.Terminals.ListTerminals(c.Request.Context(), *userOf(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, list)
	return nil
}

// startTerminal is POST /api/terminals: {"name", "cwd", "kernel_name"}, all optional. It
// answers 200 with the model, as Jupyter does, once the Terminal exists: its pod comes after,
// and the WebSocket waits for it.
func (s *Server) startTerminal(c *gin.Context) error {
	var body jupyter.StartTerminal
	if err := readJSON(c, &body); err != nil {
		return err
	}
	ctx, u := c.Request.Context(), *userOf(c)
	cwd, err := s.terminalCwd(ctx, body.Cwd)
	if err != nil {
		return err
	}
	spec, err := s.terminalKernelSpec(ctx, u, body.KernelName)
	if err != nil {
		return err
	}
	m, err := s.opts.Terminals.StartTerminal(ctx, u, repository.TerminalStart{Name: body.Name, KernelSpec: spec, Cwd: cwd})
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, m)
	return nil
}

// terminalCwd is the working directory a start asks for, relative to the user's root (their
// home) and clean; "" for the root. A directory that is not there is left out and the shell
// starts at the root, as Jupyter does; so is one the contents refuse to show (a hidden one),
// which cannot be told from one that is not there. A path that leaves the root is refused.
// A leading "/" is the root's, as in the contents API: Jupyter would take an absolute path
// on its own machine, which means nothing in a pod.
func (s *Server) terminalCwd(ctx context.Context, asked string) (string, error) {
	p := strings.Trim(asked, "/")
	if p == "" {
		return "", nil
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return "", domainerr.Invalid("cwd %q must stay inside your home", asked)
		}
	}
	if p = path.Clean(p); p == "." {
		return "", nil
	}
	_, isDir, err := s.store(ctx).Exists(ctx, p)
	var refused *domainerr.Error
	switch {
	case err != nil && !errors.As(err, &refused):
		return "", err
	case err != nil || !isDir:
		s.opts.Log.V(1).Info("A terminal's cwd is no directory of the user's; the shell starts at the root", "cwd", asked)
		return "", nil
	}
	return p, nil
}

// terminalKernelSpec is the kernel spec a terminal start runs in: the one asked for, else the
// server's terminal kernel spec when the user may start it, else the user's default.
func (s *Server) terminalKernelSpec(ctx context.Context, u User, asked string) (string, error) {
	if asked != "" || s.opts.TerminalKernelSpec == "" {
		return s.kernelName(ctx, u, asked)
	}
	specs, err := s.userKernelSpecs(ctx, u)
	if err != nil {
		return "", err
	}
	for _, ks := range specs {
		if strings.EqualFold(ks.Name, s.opts.TerminalKernelSpec) {
			return ks.Name, nil
		}
	}
	return s.defaultKernelSpec(specs), nil
}

// getTerminal is GET /api/terminals/<name>.
func (s *Server) getTerminal(c *gin.Context) error {
	m, err := s.opts.Terminals.GetTerminal(c.Request.Context(), *userOf(c), c.Param("name"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, m)
	return nil
}

// deleteTerminal is DELETE /api/terminals/<name>: 204 once the Terminal is gone (its pod
// follows).
func (s *Server) deleteTerminal(c *gin.Context) error {
	if err := s.opts.Terminals.DeleteTerminal(c.Request.Context(), *userOf(c), c.Param("name")); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// terminalSocket is WS /terminals/websocket/<name>: the terminal, proxied to its agent, which
// speaks terminado's JSON messages in text frames, as they are. A terminal whose pod is still
// coming is waited for (see TerminalService.TerminalEndpoint); one that has ended is told
// as terminado tells a client of a shell that exited (see endedTerminal).
func (s *Server) terminalSocket(c *gin.Context) error {
	if !websocket.IsWebSocketUpgrade(c.Request) {
		return domainerr.Invalid("a WebSocket upgrade is required")
	}
	ep, err := s.opts.Terminals.TerminalEndpoint(c.Request.Context(), *userOf(c), c.Param("name"))
	var ended *repository.TerminalEnded
	switch {
	case errors.As(err, &ended):
		s.endedTerminal(c, ended)
		return nil
	case err != nil && c.Request.Context().Err() != nil:
		// The client left while its terminal's pod was coming: nobody to answer.
		return nil
	case err != nil:
		return err
	}
	dialCtx, cancel := context.WithTimeout(c.Request.Context(), agentDialWait)
	defer cancel()
	var fromAgent agentConn
	upstream, err := s.agents.DialTerminal(dialCtx, ep, fromAgent.wrap)
	if errors.Is(err, agentclient.ErrUnreachable) {
		// Its pod is going, or the status is behind it.
		s.opts.Log.V(1).Info("A terminal's agent is not reachable", "terminal", c.Param("name"), "error", err.Error())
		return domainerr.Unavailable("The terminal is not reachable: try again shortly")
	}
	if err != nil {
		return err
	}
	s.relayFromAgent(c, upstream, fromAgent.conn)
	return nil
}

// endedTerminal answers a connection to a terminal that has ended: the connection is taken
// and ends at once with ["disconnect", 1], the message terminado sends when the shell exits,
// which makes JupyterLab's client stop rather than reconnect. For a pod that failed, why
// comes first, as a line of output.
func (s *Server) endedTerminal(c *gin.Context, ended *repository.TerminalEnded) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ws, err := up.Upgrade(c.Writer, c.Request, nil)
	if err != nil {
		// The upgrader has answered the client.
		return
	}
	defer func() { _ = ws.Close() }()
	deadline := time.Now().Add(time.Second)
	_ = ws.SetWriteDeadline(deadline)
	if ended.Failed {
		_ = ws.WriteJSON([]any{"stdout", "\r\n[" + ended.Error() + "]\r\n"})
	}
	_ = ws.WriteJSON([]any{"disconnect", 1})
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "the terminal has ended"), deadline)
	// The client's close answers ours; what it sends before is dropped.
	_ = ws.SetReadDeadline(deadline)
	for {
		if _, _, err := ws.NextReader(); err != nil {
			return
		}
	}
}
