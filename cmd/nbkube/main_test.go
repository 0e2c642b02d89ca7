package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// logLine parses args with a command's flag set and logs one line as the command would.
func logLine(t *testing.T, args ...string) string {
	t.Helper()
	fs, logOpts := newFlagSet("test")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	logOpts.DestWriter = &buf
	zap.New(zap.UseFlagOptions(logOpts)).WithName("apiserver").Info("Jupyter API server ready", "listen", "127.0.0.1:8888")
	return buf.String()
}

func TestLogFormat_ReadableByDefaultJSONOnRequest(t *testing.T) {
	line := logLine(t)
	if strings.HasPrefix(line, "{") || !strings.Contains(line, "\tINFO\tapiserver\tJupyter API server ready\t") {
		t.Errorf("default log line is not zap's console format: %q", line)
	}
	for _, args := range [][]string{{"--log-format=json"}, {"--log-format", "console", "--log-format", "json"}} {
		var m map[string]any
		line := logLine(t, args...)
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: log line %q is not JSON: %v", args, line, err)
		}
		if m["msg"] != "Jupyter API server ready" || m["logger"] != "apiserver" || m["listen"] != "127.0.0.1:8888" || m["level"] != "info" {
			t.Errorf("%v: log line %v", args, m)
		}
	}
}

func TestLogFormat_RefusesUnknownFormats(t *testing.T) {
	fs, _ := newFlagSet("test")
	fs.SetOutput(io.Discard)
	if err := fs.Parse([]string{"--log-format=text"}); err == nil || !strings.Contains(err.Error(), `"console" or "json"`) {
		t.Errorf("--log-format=text gave %v", err)
	}
}
