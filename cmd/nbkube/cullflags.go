package main

import (
	"flag"

	"github.com/nbkube/nbkube/controllers"
)

// bindCullFlags exposes idle culling, Jupyter Server's MappingKernelManager.cull_* settings
// and TerminalManager.cull_* settings (in seconds there, as they may be here), how often
// running kernels report their state, and how many kernels are reconciled at once.
func bindCullFlags(fs *flag.FlagSet, o *controllers.Options) {
	o.Culling.Interval, o.StatusInterval = controllers.DefaultCullInterval, controllers.DefaultStatusInterval
	o.TerminalCulling.Interval = controllers.DefaultCullInterval
	o.Culling.UnusedTimeout = controllers.DefaultUnusedTimeout
	durationFlag(fs, &o.Culling.IdleTimeout, "cull-idle-timeout", true,
		"shut kernels down after this long without activity, Jupyter's cull_idle_timeout (0 turns culling off); a KernelSpec's culling.idleTimeout overrides it")
	durationFlag(fs, &o.Culling.Interval, "cull-interval", false, "how often kernels are checked for culling, Jupyter's cull_interval")
	fs.BoolVar(&o.Culling.CullConnected, "cull-connected", false,
		"also cull idle kernels that have clients connected, Jupyter's cull_connected; a KernelSpec's culling.cullConnected overrides it")
	fs.BoolVar(&o.Culling.CullBusy, "cull-busy", false,
		"also cull busy kernels whose last activity is older than the idle timeout, Jupyter's cull_busy; a KernelSpec's culling.cullBusy overrides it")
	durationFlag(fs, &o.Culling.UnusedTimeout, "cull-unused-timeout", true,
		"shut down kernels that no client has connected to this long after their start, even with idle culling off (0 never): what an API server that died before its client came leaves")
	durationFlag(fs, &o.TerminalCulling.InactiveTimeout, "terminals-cull-inactive-timeout", true,
		"delete terminals after this long without a keystroke or output, connected or not, Jupyter's TerminalManager.cull_inactive_timeout (0 turns terminal culling off)")
	durationFlag(fs, &o.TerminalCulling.Interval, "terminals-cull-interval", false, "how often terminals are checked for culling, Jupyter's TerminalManager.cull_interval")
	durationFlag(fs, &o.StatusInterval, "kernel-status-interval", false,
		"how often a running kernel's agent is asked for its state, activity and connections, at most (see --kernel-status-max-polls)")
	fs.Float64Var(&o.MaxStatusPolls, "kernel-status-max-polls", controllers.DefaultMaxStatusPolls,
		"the most status requests a second to running kernels' agents, all together: with more kernels than this times --kernel-status-interval, each is asked less often (negative: no bound)")
	fs.IntVar(&o.KernelWorkers, "kernel-workers", controllers.DefaultKernelWorkers,
		"how many kernels the kernel controller reconciles at once (starts, status reports)")
}
