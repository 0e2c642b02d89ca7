package agent

import (
	"time"

	"github.com/go-logr/logr"
)

// Config is what the agent needs to know; cmd/ fills it from the pod's environment.
type Config struct {
	// KernelID names the kernel (the Kernel resource).
	KernelID string
	// Listen is the address of the agent's HTTP server, pod IP and agent port.
	Listen string
	// SecretDir holds the kernel's Secret: the HMAC key and the agent token.
	SecretDir string
	// Argv is the kernel's command line; "{connection_file}" is substituted.
	Argv []string
	// WorkDir is where the kernel starts, and what the directories of PathWorkDir requests
	// are relative to; empty, the agent's own working directory (the pod's, which under
	// `nbkube local` is the host directory behind the container's path).
	WorkDir string
	// ContentsDir is the kernel's contents directory (its home), which the notebooks that
	// clients name are relative to; empty, outputs are never written into notebooks.
	ContentsDir string
	// RuntimeDir is where the connection file is written (a private directory is made in it).
	RuntimeDir string
	// StopGrace is how long the kernel has to exit after a shutdown request, and again after
	// SIGTERM.
	StopGrace time.Duration
	// ExitAfterReply is how long a kernel that answered a shutdown request has to exit by
	// itself, running its exit handlers, before it is sent SIGTERM; default 20 ms. ipykernel
	// takes a few hundred milliseconds to wind down by itself, and a shutdown does not wait
	// for that: a kernel that has not exited then ends without its exit handlers.
	ExitAfterReply time.Duration
	// InterruptMode is "signal" (SIGINT to the kernel's process group) or "message" (an
	// interrupt_request on the control channel), the kernel spec's interrupt_mode.
	InterruptMode string
	// StartTimeout bounds how long a kernel may take to answer its first kernel_info_request.
	StartTimeout time.Duration
	// HeartbeatInterval is how often the kernel's heartbeat is checked; three missed beats in
	// a row report the kernel dead.
	HeartbeatInterval time.Duration
	// MaxRestarts is how many times in a row a kernel that dies by itself is restarted, as
	// Jupyter's restarter does, before the agent gives up and exits as the kernel did.
	MaxRestarts int
	// Replay bounds the messages kept for a disconnected client session.
	Replay ReplayLimits
	// MaxMessageBytes bounds one WebSocket message from a client; MemoryBudget bounds it too.
	MaxMessageBytes int64
	// MemoryBudget bounds, in bytes, what the agent holds for clients in the kernel's
	// container, whose memory limit the kernel shares: replay buffers, frames queued for
	// connections and client messages held while the kernel starts (see budget).
	MemoryBudget int64
	// TerminationLog, when set, receives why the kernel could not start (the container's
	// terminationMessagePath), so that the pod's status says it without the agent's logs.
	TerminationLog string
	// ForkServer is the socket of the node's kernel fork server (`nbkube local` has one): a
	// kernel it can fork starts in milliseconds instead of importing ipykernel anew. Empty,
	// or refused, the kernel starts as the agent's child.
	ForkServer string
	// Cluster is the ipyparallel cluster the kernel is attached to, if any.
	Cluster ClusterConfig
	// Log receives the agent's structured log.
	Log logr.Logger
}

// ClusterConfig says where a kernel attached to an ipyparallel cluster finds it.
type ClusterConfig struct {
	// Profile is the cluster's name, the IPython profile its client file goes into; empty
	// when the kernel is attached to no cluster.
	Profile string
	// File is the cluster's client connection file.
	File string
	// IPythonDir is the kernel's IPython directory ($IPYTHONDIR, else ~/.ipython).
	IPythonDir string
}

// ReplayLimits bound what the agent keeps for disconnected client sessions.
type ReplayLimits struct {
	// Messages and Bytes bound one session's buffer; the oldest messages go first.
	Messages int
	Bytes    int
	// TTL is how long a disconnected session is kept at all.
	TTL time.Duration
	// Sessions bounds the number of disconnected sessions kept.
	Sessions int
}

// DefaultMemoryBudget is Config.MemoryBudget when none is given.
const DefaultMemoryBudget = 256 << 20

func (c *Config) setDefaults() {
	if c.StopGrace <= 0 {
		c.StopGrace = 5 * time.Second
	}
	if c.ExitAfterReply <= 0 {
		c.ExitAfterReply = 20 * time.Millisecond
	}
	if c.InterruptMode == "" {
		c.InterruptMode = "signal"
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 2 * time.Minute
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.MaxRestarts <= 0 {
		c.MaxRestarts = 5
	}
	if c.Replay.Messages <= 0 {
		c.Replay.Messages = 10000
	}
	if c.Replay.Bytes <= 0 {
		c.Replay.Bytes = 64 << 20
	}
	if c.Replay.TTL <= 0 {
		c.Replay.TTL = time.Hour
	}
	if c.Replay.Sessions <= 0 {
		c.Replay.Sessions = 64
	}
	if c.MemoryBudget <= 0 {
		c.MemoryBudget = DefaultMemoryBudget
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 256 << 20
	}
	c.MaxMessageBytes = min(c.MaxMessageBytes, c.MemoryBudget)
}
