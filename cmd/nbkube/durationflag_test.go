package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nbkube/nbkube/controllers"
)

// parseDurationFlags parses args with the culling and API flags bound, as manager and local do.
func parseDurationFlags(args ...string) (controllers.Options, apiFlags, error) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o controllers.Options
	bindCullFlags(fs, &o)
	var api apiFlags
	api.bind(fs, "")
	err := fs.Parse(args)
	return o, api, err
}

func TestDurationFlags_TakeJupyterSecondsAndGoDurations(t *testing.T) {
	tests := []struct {
		args                           []string
		idle, interval, status, window time.Duration
	}{
		{args: []string{"--cull-idle-timeout", "5"}, idle: 5 * time.Second},
		{args: []string{"--cull-idle-timeout=3600", "--cull-interval=300"}, idle: time.Hour, interval: 5 * time.Minute},
		{args: []string{"--cull-idle-timeout=1h30m", "--cull-interval=90s"}, idle: 90 * time.Minute, interval: 90 * time.Second},
		{args: []string{"--cull-idle-timeout=0"}, idle: 0},
		{args: []string{"--kernel-status-interval=2.5"}, status: 2500 * time.Millisecond},
		{args: []string{"--rate-limit-window=0.5"}, window: 500 * time.Millisecond},
		{args: []string{"--rate-limit-window=3s"}, window: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o, api, err := parseDurationFlags(tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if tt.interval == 0 {
				tt.interval = controllers.DefaultCullInterval
			}
			if tt.status == 0 {
				tt.status = controllers.DefaultStatusInterval
			}
			if tt.window == 0 {
				tt.window = 3 * time.Second
			}
			if o.Culling.IdleTimeout != tt.idle || o.Culling.Interval != tt.interval || o.StatusInterval != tt.status || api.rateLimitWindow != tt.window {
				t.Errorf("idle %s, interval %s, status %s, window %s; want %s, %s, %s, %s",
					o.Culling.IdleTimeout, o.Culling.Interval, o.StatusInterval, api.rateLimitWindow, tt.idle, tt.interval, tt.status, tt.window)
			}
		})
	}
}

// Terminal culling is off by default and checks every 300 s, as Jupyter's.
func TestDurationFlags_TerminalCulling(t *testing.T) {
	for _, tt := range []struct {
		args               []string
		inactive, interval time.Duration
	}{
		{interval: controllers.DefaultCullInterval},
		{args: []string{"--terminals-cull-inactive-timeout=3600", "--terminals-cull-interval=60"}, inactive: time.Hour, interval: time.Minute},
		{args: []string{"--terminals-cull-inactive-timeout=30m"}, inactive: 30 * time.Minute, interval: controllers.DefaultCullInterval},
	} {
		o, _, err := parseDurationFlags(tt.args...)
		if err != nil {
			t.Fatal(err)
		}
		if o.TerminalCulling.InactiveTimeout != tt.inactive || o.TerminalCulling.Interval != tt.interval {
			t.Errorf("%v: inactive %s, interval %s; want %s, %s", tt.args, o.TerminalCulling.InactiveTimeout, o.TerminalCulling.Interval, tt.inactive, tt.interval)
		}
	}
	if _, _, err := parseDurationFlags("--terminals-cull-interval=0"); err == nil {
		t.Error("--terminals-cull-interval=0 accepted")
	}
}

func TestDurationFlags_KernelStartTimeoutTakesSecondsToo(t *testing.T) {
	_, api, err := parseDurationFlags("--kernel-start-timeout", "600")
	if err != nil {
		t.Fatal(err)
	}
	if api.kernelStartTimeout != 10*time.Minute {
		t.Errorf("kernel start timeout %s, want 10m", api.kernelStartTimeout)
	}
}

func TestDurationFlags_RefuseNegativeAndUnreadableDurations(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: []string{"--cull-idle-timeout=-5"}, wantErr: "must not be negative"},
		{args: []string{"--cull-idle-timeout=-1m"}, wantErr: "must not be negative"},
		{args: []string{"--cull-interval=0"}, wantErr: "must be more than 0"},
		{args: []string{"--cull-idle-timeout=5 minutes"}, wantErr: "seconds (such as 3600 or 0.5) or a Go duration (such as 90s or 1h30m)"},
		{args: []string{"--cull-idle-timeout=NaN"}, wantErr: "seconds (such as 3600 or 0.5) or a Go duration"},
		{args: []string{"--cull-idle-timeout=1e300"}, wantErr: "too long"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, _, err := parseDurationFlags(tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}
