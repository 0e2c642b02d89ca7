package testenv

import (
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// LogLines collects the lines of a logger, for a test to read what was logged.
type LogLines struct {
	mu    sync.Mutex
	lines []string
}

// Logger is a logger whose lines l collects.
func (l *LogLines) Logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{})
}

// String is the lines collected so far, one per line.
func (l *LogLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
