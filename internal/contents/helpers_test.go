package contents

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/domainerr"
)

var testTime = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

// newTestStore returns a store on a fresh directory, with a fake clock unless opts has one.
func newTestStore(t testing.TB, opts Options) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	if opts.Clock == nil {
		opts.Clock = clocktesting.NewFakePassiveClock(testTime)
	}
	s, err := New(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

// writeTree creates files (content given) and directories (names ending in "/") under dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if name[len(name)-1] == '/' {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t testing.TB, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func exists(dir, name string) bool {
	_, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name)))
	return err == nil
}

// wantError checks that err is a store refusal of the given kind and, unless empty, message.
func wantError(t testing.TB, err, kind error, msg string) {
	t.Helper()
	var e *domainerr.Error
	if !errors.Is(err, kind) || !errors.As(err, &e) {
		t.Fatalf("error = %v, want %v", err, kind)
	}
	if msg != "" && e.Message != msg {
		t.Fatalf("message = %q, want %q", e.Message, msg)
	}
}

var ctx = context.Background()

const emptyNotebook = "{\n \"cells\": [],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n"
