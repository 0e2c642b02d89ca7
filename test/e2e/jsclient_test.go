package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// nodeTestTimeout bounds one `node --test` run. kernels.test.mjs bounds each of its tests at
// 90 s; a healthy run of the file takes well under a minute.
const nodeTestTimeout = 5 * time.Minute

// TestJupyterLabServices runs JupyterLab's @jupyterlab/services client (test/js) against one
// `nbkube local`: a real client, unmodified, must be able to use the contents API, and the
// kernel specs, sessions, kernels and kernel channels APIs with either WebSocket protocol.
func TestJupyterLabServices(t *testing.T) {
	jsDir, err := filepath.Abs("../js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(jsDir, "node_modules", "@jupyterlab", "services")); err != nil {
		t.Fatalf("@jupyterlab/services is not installed in %s (make test-deps installs it): %v", jsDir, err)
	}
	// One instance for all the files: each start costs about ten seconds, and every test file
	// cleans up what it started.
	inst := startLocal(t, t.TempDir(), t.TempDir())
	api := inst.api(t)
	env := []string{"NBKUBE_URL=" + api.base, "NBKUBE_TOKEN=" + api.token}

	t.Run("Contents", func(t *testing.T) {
		runNodeTest(t, jsDir, "contents.test.mjs", 1, env...)
	})
	// kernels.test.mjs reads NBKUBE_WS_PROTOCOL: "" makes its clients offer no subprotocol
	// (JupyterLab 3, Notebook 6: Jupyter's JSON protocol), "v1" lets them offer
	// v1.kernel.websocket.jupyter.org as JupyterLab 4 does. nbkube must serve both.
	t.Run("Kernels_JSONProtocol", func(t *testing.T) {
		runNodeTest(t, jsDir, "kernels.test.mjs", 7, append(env, "NBKUBE_WS_PROTOCOL=")...)
	})
	t.Run("Kernels_V1Subprotocol", func(t *testing.T) {
		runNodeTest(t, jsDir, "kernels.test.mjs", 7, append(env, "NBKUBE_WS_PROTOCOL=v1")...)
	})
	// JupyterLab's terminal panel: TerminalManager and TerminalConnection, unmodified; the
	// same file against Jupyter Server with terminado, the reference, so that a check that
	// only nbkube passes fails here.
	t.Run("Terminals", func(t *testing.T) {
		runNodeTest(t, jsDir, "terminals.test.mjs", 3, env...)
	})
	inst.stop(t)
	t.Run("Terminals_JupyterServer", func(t *testing.T) {
		js := startJupyterServer(t, t.TempDir())
		runNodeTest(t, jsDir, "terminals.test.mjs", 3, "NBKUBE_URL="+js.base, "NBKUBE_TOKEN="+js.token)
	})
}

// The summary lines node's test runner prints at the end of its TAP output.
var (
	nodePassed = regexp.MustCompile(`(?m)^# pass (\d+)$`)
	nodeFailed = regexp.MustCompile(`(?m)^# fail (\d+)$`)
)

// runNodeTest runs `node --test file` in dir with env added and fails unless exactly wantPass
// tests passed and none failed: a count that drops means a test file lost tests silently.
func runNodeTest(t *testing.T, dir, file string, wantPass int, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeTestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", file)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// A grandchild holding node's output open must not keep the test waiting past the kill.
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	passed, failed := nodePassed.FindSubmatch(out), nodeFailed.FindSubmatch(out)
	if err != nil || passed == nil || failed == nil || string(failed[1]) != "0" || string(passed[1]) != strconv.Itoa(wantPass) {
		t.Fatalf("node --test %s (%v): want \"# pass %d\" and \"# fail 0\":\n%s", file, err, wantPass, out)
	}
}
