package contents

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/nbformat"
)

// readNotebook returns the content of the notebook file p (st, data) as Jupyter's get
// returns it, and its validation message.
func (s *Store) readNotebook(p string, st statInfo, data []byte) (json.RawMessage, string, error) {
	content, minor, newIDs, err := nbformat.Read(data)
	if errors.Is(err, nbformat.ErrOlderFormat) {
		return s.readUpgraded(p, data)
	}
	if err != nil {
		return nil, "", unreadable(p, err)
	}
	key := keyOf(st)
	msg, ok := s.results.get(key)
	if !ok {
		if msg, err = nbformat.Validate(data, minor); err != nil {
			return nil, "", err
		}
		s.results.put(key, msg)
	}
	if !newIDs {
		// The same file always reads the same: the next read can skip all this.
		s.notebooks.put(cachedNotebook{key: key, content: content, msg: msg})
	}
	return content, msg, nil
}

// readUpgraded is readNotebook of a notebook of nbformat 1 to 3. The validation is not
// cached: the message shows the notebook, whose cell ids each read makes anew. Upgrading is
// the work of a save, so it waits its turn with saves.
func (s *Store) readUpgraded(p string, data []byte) (json.RawMessage, string, error) {
	s.cpu <- struct{}{}
	defer func() { <-s.cpu }()
	content, msg, err := nbformat.Upgrade(data)
	if err != nil {
		return nil, "", unreadable(p, err)
	}
	return content, msg, nil
}

// unreadable is Jupyter's refusal of the notebook file p when nbformat refuses to read it
// (err, domainerr.ErrInvalid); any other error is the server's and stays as it is.
func unreadable(p string, err error) error {
	if !errors.Is(err, domainerr.ErrInvalid) {
		return err
	}
	return &domainerr.Error{Kind: domainerr.ErrInvalid, Message: fmt.Sprintf("Unreadable Notebook: %s %v", p, err), Err: err}
}
