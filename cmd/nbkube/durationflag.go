package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// durationValue is every duration flag of nbkube: Jupyter spells its settings in seconds
// (cull_idle_timeout=3600, rate_limit_window=0.5), Go programs in durations (1h, 500ms), and
// both mean the same here. A bare number is seconds; a Go duration is read as one. Below zero
// is refused, and zero unless the flag allows it (where it turns something off).
type durationValue struct {
	p         *time.Duration
	allowZero bool
}

// durationFlag binds the duration flag name, defaulting to *p.
func durationFlag(fs *flag.FlagSet, p *time.Duration, name string, allowZero bool, usage string) {
	fs.Var(durationValue{p: p, allowZero: allowZero}, name, usage+" (seconds, or a Go `duration` such as 90s)")
}

func (v durationValue) String() string {
	if v.p == nil {
		return ""
	}
	return v.p.String()
}

func (v durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	if d == 0 && !v.allowZero {
		return fmt.Errorf("%s: must be more than 0", s)
	}
	*v.p = d
	return nil
}

// parseDuration reads seconds ("3600", "0.5") or a Go duration ("1h30m").
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	var d time.Duration
	if secs, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(secs) && !math.IsInf(secs, 0) {
		if secs > float64(math.MaxInt64)/float64(time.Second) {
			return 0, fmt.Errorf("%s: too long", s)
		}
		d = time.Duration(secs * float64(time.Second))
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, fmt.Errorf("%q: want seconds (such as 3600 or 0.5) or a Go duration (such as 90s or 1h30m)", s)
	}
	if d < 0 || strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("%s: must not be negative", s)
	}
	return d, nil
}
