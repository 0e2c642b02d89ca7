package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbkube/nbkube/internal/agentapi"
)

// Output streamed as fast as the kernel prints is read in moderated batches and written to
// the client in bursts: all of it arrives, in order, on both protocols.
func TestAgent_FastOutputArrivesWholeAndInOrder(t *testing.T) {
	ra := startAgent(t, nil)
	const n = 5000
	var want strings.Builder
	for i := range n {
		fmt.Fprintf(&want, "%d\n", i)
	}
	for _, v1 := range []bool{false, true} {
		c := ra.connectWith(t, fmt.Sprintf("fast-%v", v1), v1, "&"+agentapi.QueryMsgRateLimit+"=0&"+agentapi.QueryDataRateLimit+"=0")
		r := c.collect(c.sendExecute(fmt.Sprintf("for i in range(%d): print(i, flush=True)", n), false), 60*time.Second, nil)
		if got := r.streams(); got != want.String() {
			t.Errorf("v1 %v: %d bytes of output, want %d; in order and whole: %v", v1, len(got), want.Len(), got == want.String())
		}
		if r.reply["status"] != "ok" {
			t.Errorf("v1 %v: reply %v", v1, r.reply)
		}
	}
}
