package apiserver

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/repository"
)

// listSessions is GET /api/sessions.
func (s *Server) listSessions(c *gin.Context) error {
	list, err := s.opts.Sessions.ListSessions(c.Request.Context(), *userOf(c))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, list)
	return nil
}

// createSession is POST /api/sessions: 201 with the session, the existing one for the path
// if there is one.
func (s *Server) createSession(c *gin.Context) error {
	ch, err := s.sessionChange(c, true)
	if err != nil {
		return err
	}
	m, _, err := s.opts.Sessions.CreateSession(c.Request.Context(), *userOf(c), ch)
	if err != nil {
		return err
	}
	c.Header("Location", s.opts.BaseURL+"api/sessions/"+m.ID)
	c.JSON(http.StatusCreated, m)
	return nil
}

// getSession is GET /api/sessions/<id>.
func (s *Server) getSession(c *gin.Context) error {
	m, err := s.opts.Sessions.GetSession(c.Request.Context(), *userOf(c), c.Param("id"))
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, m)
	return nil
}

// updateSession is PATCH /api/sessions/<id>.
func (s *Server) updateSession(c *gin.Context) error {
	ch, err := s.sessionChange(c, false)
	if err != nil {
		return err
	}
	m, err := s.opts.Sessions.UpdateSession(c.Request.Context(), *userOf(c), c.Param("id"), ch)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, m)
	return nil
}

// deleteSession is DELETE /api/sessions/<id>: 204 once the session's kernel has shut down.
func (s *Server) deleteSession(c *gin.Context) error {
	if err := s.opts.Sessions.DeleteSession(c.Request.Context(), *userOf(c), c.Param("id")); err != nil {
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// sessionChange binds a session request body to a change. A kernel name goes with it when
// the body names no kernel id; on create, also when it does (a kernel of that name starts
// if the id names no kernel), and the default name when the body names none.
func (s *Server) sessionChange(c *gin.Context, create bool) (repository.SessionChange, error) {
	var req jupyter.SessionRequest
	if err := readJSON(c, &req); err != nil {
		return repository.SessionChange{}, err
	}
	ch := repository.SessionChange{Path: req.Path, Name: req.Name, Type: req.Type, Cluster: req.Cluster}
	if ch.Path == nil && req.Notebook != nil {
		ch.Path = req.Notebook.Path
		if ch.Name == nil {
			ch.Name = req.Notebook.Name
		}
	}
	name, named := "", false
	if req.Kernel != nil {
		ch.KernelID = req.Kernel.ID
		if req.Kernel.Name != nil {
			name, named = *req.Kernel.Name, true
		}
		ch.Parameters = req.Kernel.Parameters
	}
	hasID := ch.KernelID != nil && *ch.KernelID != ""
	if create || (named && !hasID) {
		spec, err := s.kernelName(c.Request.Context(), *userOf(c), name)
		if err != nil {
			return ch, err
		}
		ch.KernelSpec = &spec
	}
	return ch, nil
}
