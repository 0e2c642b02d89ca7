package agentapi

import (
	"net/url"
	"testing"
	"time"
)

// The limits the API server sets are the limits the agent reads.
func TestRateLimits_TravelInTheChannelsQuery(t *testing.T) {
	for _, l := range []RateLimits{
		DefaultRateLimits,
		{MsgRate: 0, DataRate: 0, Window: 1500 * time.Millisecond},
		{MsgRate: 12.5, DataRate: 1e9, Window: 59 * time.Minute},
	} {
		q := url.Values{}
		l.SetQuery(q)
		if got := RateLimitsFromQuery(q, RateLimits{MsgRate: -1, DataRate: -1, Window: -1}); got != l {
			t.Errorf("%+v arrived as %+v (query %s)", l, got, q.Encode())
		}
	}
}

// A value left out, malformed or out of range keeps the agent's default.
func TestRateLimitsFromQuery_KeepsTheDefaultOfWhatIsNotValid(t *testing.T) {
	def := DefaultRateLimits
	for _, query := range []string{
		"",
		"iopub_msg_rate_limit=-1&iopub_data_rate_limit=-0.5&rate_limit_window=-3",
		"iopub_msg_rate_limit=many&iopub_data_rate_limit=&rate_limit_window=0",
		"rate_limit_window=3600",
	} {
		q, _ := url.ParseQuery(query)
		if got := RateLimitsFromQuery(q, def); got != def {
			t.Errorf("%q: %+v, want the defaults", query, got)
		}
	}
	q := url.Values{}
	RateLimits{MsgRate: -1, DataRate: 5, Window: -time.Second}.SetQuery(q)
	if q.Has(QueryMsgRateLimit) || q.Get(QueryDataRateLimit) != "5" || q.Has(QueryRateLimitWindow) {
		t.Errorf("negative values were not left out: %s", q.Encode())
	}
}
