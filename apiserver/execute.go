package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/contents"
	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/jupyter"
	"github.com/nbkube/nbkube/internal/nbformat"
)

// Server-side execution, the contract of jupyter-server-documents (also jupyverse and
// jupyter-server-nbmodel): a client names cells of a stored notebook and the kernel runs them
// with no client attached; their outputs land in the notebook. The API server checks the
// request against the stored notebook (each cell's source hash, so that a cell edited since
// the user pressed Run is not run) and hands the cells' sources to the kernel's agent, which
// keeps the requests' order, sends the cells to the kernel and writes what they send
// (agent/execute.go). The answer comes once the cells are in the kernel's queue.

// documentPrefix begins the document_id of a notebook: json:notebook:<file id>.
const documentPrefix = "json:notebook:"

// executeRequest is the body of POST /api/kernels/<id>/execute.
type executeRequest struct {
	DocumentID string `json:"document_id"`
	Cells      []struct {
		CellID     string `json:"cell_id"`
		SourceHash string `json:"source_hash"`
	} `json:"cells"`
	ClientID          string `json:"client_id"`
	RequestID         string `json:"request_id"`
	PreviousRequestID string `json:"previous_request_id"`
}

// sourceMismatch is the 409 of a cell whose stored source is not the one the client hashed:
// jupyter-server-documents' body, with Jupyter's message and reason beside it.
type sourceMismatch struct {
	Error   string `json:"error"`
	CellID  string `json:"cell_id"`
	Message string `json:"message"`
	Reason  string `json:"reason"`
}

// executeWait bounds the agent's answer: the wait for a previous request
// (agentapi.ExecuteOrderWait) and the sending of the cells.
const executeWait = agentapi.ExecuteOrderWait + 15*time.Second

// executeCells is POST /api/kernels/<id>/execute: 200 null once the cells are in the kernel's
// queue.
func (s *Server) executeCells(c *gin.Context) error {
	var req executeRequest
	if err := json.NewDecoder(c.Request.Body).Decode(&req); err != nil {
		return domainerr.Invalid("The body must be {document_id, cells: [{cell_id, source_hash}]}: %v", err)
	}
	fileID, ok := strings.CutPrefix(req.DocumentID, documentPrefix)
	if !ok || fileID == "" {
		return domainerr.Invalid("document_id must be %s<file id>", documentPrefix)
	}
	if len(req.Cells) == 0 {
		return domainerr.Invalid("cells must name at least one cell")
	}
	ctx, u, id := c.Request.Context(), *userOf(c), c.Param("id")
	ep, err := s.opts.Kernels.Endpoint(ctx, u, id)
	if err != nil {
		return err
	}
	notebook, cells, err := storedCells(ctx, s.store(ctx), fileID)
	if err != nil {
		return err
	}
	x := agentapi.Execute{Notebook: notebook, RequestID: req.RequestID, PreviousRequestID: req.PreviousRequestID}
	for _, want := range req.Cells {
		if want.CellID == "" || want.SourceHash == "" {
			return domainerr.Invalid("every cell needs its cell_id and source_hash")
		}
		cell, ok := cells[want.CellID]
		if !ok {
			return domainerr.Invalid("the notebook %s has no cell %q", notebook, want.CellID)
		}
		if jupyter.SourceHash(cell.source) != want.SourceHash {
			c.AbortWithStatusJSON(http.StatusConflict, sourceMismatch{Error: "source_mismatch", CellID: want.CellID, Reason: "source_mismatch",
				Message: "the cell " + want.CellID + " was changed since it was asked to run: its stored source has another hash"})
			return nil
		}
		if cell.code {
			x.Cells = append(x.Cells, agentapi.ExecuteCell{CellID: want.CellID, Code: cell.source})
		}
	}
	if len(x.Cells) > 0 {
		actx, cancel := context.WithTimeout(ctx, executeWait)
		defer cancel()
		if err := s.agents.Execute(actx, ep, x); err != nil {
			return err
		}
	}
	c.JSON(http.StatusOK, nil)
	return nil
}

// storedCell is what execution needs of a stored cell.
type storedCell struct {
	source string
	code   bool
}

// storedCells reads the notebook of a file id: its path and its cells by id.
func storedCells(ctx context.Context, store *contents.Store, fileID string) (string, map[string]storedCell, error) {
	p, err := store.FilePath(ctx, fileID)
	if errors.Is(err, domainerr.ErrNotFound) {
		return "", nil, domainerr.Invalid("no document json:notebook:%s", fileID)
	}
	if err != nil {
		return "", nil, err
	}
	if !strings.HasSuffix(p, ".ipynb") {
		return "", nil, domainerr.Invalid("the document %s is not a notebook", p)
	}
	m, err := store.Get(ctx, p, contents.GetOptions{Type: jupyter.TypeNotebook, Content: true})
	if err != nil {
		return "", nil, err
	}
	raw, err := json.Marshal(m.Content)
	if err != nil {
		return "", nil, err
	}
	var nb struct {
		Cells []struct {
			ID       string             `json:"id"`
			CellType string             `json:"cell_type"`
			Source   nbformat.Multiline `json:"source"`
		} `json:"cells"`
	}
	if err := json.Unmarshal(raw, &nb); err != nil {
		return "", nil, err
	}
	cells := make(map[string]storedCell, len(nb.Cells))
	for _, cell := range nb.Cells {
		cells[cell.ID] = storedCell{source: string(cell.Source), code: cell.CellType == "code"}
	}
	return p, cells, nil
}
