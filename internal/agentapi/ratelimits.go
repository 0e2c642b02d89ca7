package agentapi

import (
	"net/url"
	"strconv"
	"time"
)

// RateLimits are Jupyter Server's iopub limits (ServerApp.iopub_msg_rate_limit,
// iopub_data_rate_limit, rate_limit_window), which keep a runaway print loop from flooding a
// browser. The API server sets them for every channels connection and the agent applies them
// to each.
type RateLimits struct {
	// MsgRate bounds iopub messages per second; 0 disables the limit.
	MsgRate float64
	// DataRate bounds stream output bytes per second; 0 disables the limit.
	DataRate float64
	// Window is the time over which the rates are measured.
	Window time.Duration
}

// DefaultRateLimits are Jupyter Server's defaults.
var DefaultRateLimits = RateLimits{MsgRate: 1000, DataRate: 1_000_000, Window: 3 * time.Second}

// Query parameters of PathChannels that carry RateLimits, named as Jupyter Server's settings;
// the window is in seconds.
const (
	QueryMsgRateLimit    = "iopub_msg_rate_limit"
	QueryDataRateLimit   = "iopub_data_rate_limit"
	QueryRateLimitWindow = "rate_limit_window"
)

// maxWindow bounds the window the agent takes from a query.
const maxWindow = time.Hour

// SetQuery puts the limits into a PathChannels query. A negative value is left out, so that
// the agent keeps its default for it.
func (l RateLimits) SetQuery(q url.Values) {
	for name, v := range map[string]float64{QueryMsgRateLimit: l.MsgRate, QueryDataRateLimit: l.DataRate, QueryRateLimitWindow: l.Window.Seconds()} {
		if v >= 0 {
			q.Set(name, strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
}

// RateLimitsFromQuery reads the limits of a PathChannels query: a value that is missing,
// malformed or out of range (a negative rate, a window that is not positive or reaches an
// hour) keeps def's.
func RateLimitsFromQuery(q url.Values, def RateLimits) RateLimits {
	l := def
	if v, err := strconv.ParseFloat(q.Get(QueryMsgRateLimit), 64); err == nil && v >= 0 {
		l.MsgRate = v
	}
	if v, err := strconv.ParseFloat(q.Get(QueryDataRateLimit), 64); err == nil && v >= 0 {
		l.DataRate = v
	}
	if v, err := strconv.ParseFloat(q.Get(QueryRateLimitWindow), 64); err == nil && v > 0 && v < maxWindow.Seconds() {
		l.Window = time.Duration(v * float64(time.Second))
	}
	return l
}
