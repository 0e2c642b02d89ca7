package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/nbkube/nbkube/controllers"
)

// bindCullFlags exposes idle culling, Jupyter Server's MappingKernelManager.cull_* settings,
// and how often running kernels report their state. Durations are Go durations ("1h30m",
// "600s"): Jupyter's plain seconds need a unit here, so --cull-idle-timeout=3600 is refused
// rather than read as 3600 nanoseconds.
func bindCullFlags(fs *flag.FlagSet, o *controllers.Options) {
	o.Culling.Interval, o.StatusInterval = controllers.DefaultCullInterval, controllers.DefaultStatusInterval
	durationFlag(fs, &o.Culling.IdleTimeout, "cull-idle-timeout", true,
		"shut kernels down after this long without activity, e.g. 1h (0 turns culling off); a KernelSpec's culling.idleTimeout overrides it")
	durationFlag(fs, &o.Culling.Interval, "cull-interval", false, "how often kernels are checked for culling")
	fs.BoolVar(&o.Culling.CullConnected, "cull-connected", false,
		"also cull idle kernels that have clients connected; a KernelSpec's culling.cullConnected overrides it")
	fs.BoolVar(&o.Culling.CullBusy, "cull-busy", false,
		"also cull busy kernels whose last activity is older than the idle timeout; a KernelSpec's culling.cullBusy overrides it")
	durationFlag(fs, &o.StatusInterval, "kernel-status-interval", false,
		"how often a running kernel's agent is asked for its state, activity and connections")
}

// durationFlag binds a Go duration flag defaulting to *p; durations below zero, and zero
// unless allowed, are refused.
func durationFlag(fs *flag.FlagSet, p *time.Duration, name string, allowZero bool, usage string) {
	fs.Func(name, fmt.Sprintf("%s (a Go duration; default %s)", usage, *p), func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil {
			return errors.New("not a Go duration such as 90s or 1h30m (Jupyter's seconds need the s)")
		}
		if d < 0 || (d == 0 && !allowZero) {
			return fmt.Errorf("%s is not a positive duration", s)
		}
		*p = d
		return nil
	})
}
