package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nbkube/nbkube/internal/agentapi"
	"github.com/nbkube/nbkube/internal/wire"
)

// rateLimiter is Jupyter Server's per-connection iopub limiter: messages (and stream bytes)
// in a sliding window; over the limit, output is dropped with one stderr notice, and flows
// again under 80 % of it or when the kernel goes idle.
type rateLimiter struct {
	limits       agentapi.RateLimits
	queue        []windowEntry
	msgCount     int
	byteCount    int
	msgsExceeded bool
	dataExceeded bool
}

type windowEntry struct {
	until time.Time
	bytes int
}

var idleContent = []byte(`"idle"`)

// drop tells whether an iopub message is to be dropped; notify sends the stderr notice.
func (r *rateLimiter) drop(m *wire.Message, h wire.Header, now time.Time, notify func(string, json.RawMessage)) bool {
	if r.limits.Window <= 0 || (r.limits.MsgRate <= 0 && r.limits.DataRate <= 0) {
		return false
	}
	if h.MsgType == "" {
		h, _ = wire.ParseDecodedHeader(m.Header)
	}
	switch h.MsgType {
	case "status":
		if bytes.Contains(m.Content, idleContent) {
			*r = rateLimiter{limits: r.limits, queue: r.queue[:0]}
		}
		return false
	case "comm_open", "execute_input":
		return false
	}
	for len(r.queue) > 0 && !now.Before(r.queue[0].until) {
		r.byteCount -= r.queue[0].bytes
		r.msgCount--
		r.queue = r.queue[1:]
	}
	size := 0
	if h.MsgType == "stream" {
		size = messageSize(m)
	}
	r.msgCount++
	r.byteCount += size
	r.queue = append(r.queue, windowEntry{now.Add(r.limits.Window), size})
	window := r.limits.Window.Seconds()
	msgRate, dataRate := float64(r.msgCount)/window, float64(r.byteCount)/window
	if trips(&r.msgsExceeded, msgRate, r.limits.MsgRate) {
		notify(fmt.Sprintf(rateNotice, "message", "msg", r.limits.MsgRate, "msgs/sec", window), m.ParentHeader)
	}
	if trips(&r.dataExceeded, dataRate, r.limits.DataRate) {
		notify(fmt.Sprintf(rateNotice, "data", "data", r.limits.DataRate, "bytes/sec", window), m.ParentHeader)
	}
	if r.msgsExceeded || r.dataExceeded {
		// Not sent, so not counted.
		r.msgCount--
		r.byteCount -= size
		r.queue = r.queue[:len(r.queue)-1]
		return true
	}
	return false
}

// trips follows one limit at the current rate: exceeded is set above the limit (a zero
// limit is none) and cleared under 80 % of it. It tells whether the limit tripped just now,
// when the client is to be told.
func trips(exceeded *bool, rate, limit float64) bool {
	if limit > 0 && rate > limit {
		tripped := !*exceeded
		*exceeded = true
		return tripped
	}
	if *exceeded && rate < 0.8*limit {
		*exceeded = false
	}
	return false
}

const rateNotice = `IOPub %s rate exceeded.
The Jupyter server will temporarily stop sending output
to the client in order to avoid crashing it.
To change this limit, set the config variable
` + "`--ServerApp.iopub_%[2]s_rate_limit`" + `.

Current values:
ServerApp.iopub_%[2]s_rate_limit=%[3]g (%[4]s)
ServerApp.rate_limit_window=%[5]g (secs)
`
