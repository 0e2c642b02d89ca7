package domainerr

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestError_MatchesItsKindAndUnwrapsItsCause(t *testing.T) {
	err := fmt.Errorf("saving: %w", &Error{Kind: ErrNotFound, Message: "No such file or directory: a.ipynb", Err: fs.ErrNotExist})
	if !errors.Is(err, ErrNotFound) {
		t.Error("a wrapped refusal does not match its kind")
	}
	if errors.Is(err, ErrConflict) {
		t.Error("a refusal matches another kind")
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("a refusal hides its cause")
	}
	var de *Error
	if !errors.As(err, &de) || de.Error() != "No such file or directory: a.ipynb" {
		t.Errorf("message = %v, want the client's message alone", de)
	}
}

func TestNew_FormatsTheMessage(t *testing.T) {
	err := New(ErrInvalid, "%s is not a directory", "a")
	if err.Message != "a is not a directory" || !errors.Is(err, ErrInvalid) || err.Reason != "" || err.Unwrap() != nil {
		t.Errorf("New = %+v", err)
	}
}
