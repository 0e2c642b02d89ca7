package agent

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
)

// Environment variables the agent reads; the kernel pod builder sets them, and a kernel's own
// env cannot override them.
const (
	EnvKernelID       = "NBKUBE_KERNEL_ID"
	EnvNamespace      = "NBKUBE_NAMESPACE"
	EnvPodIP          = "NBKUBE_POD_IP"
	EnvAgentPort      = "NBKUBE_AGENT_PORT"
	EnvSecretDir      = "NBKUBE_SECRET_DIR"
	EnvInterruptMode  = "NBKUBE_INTERRUPT_MODE"
	EnvTerminationLog = "NBKUBE_TERMINATION_LOG"
	// EnvClusterProfile names the ipyparallel cluster a kernel is attached to, and
	// EnvClusterFile is the client connection file of that cluster (in the Secret volume).
	EnvClusterProfile = "NBKUBE_IPCLUSTER_PROFILE"
	EnvClusterFile    = "NBKUBE_IPCLUSTER_FILE"
)

// Main is the agent's command line (`nbkube-agent [flags] -- ARGV...`, also `nbkube agent`):
// flags, then the pod's environment, then Run. It logs JSON lines to stderr.
func Main(ctx context.Context, name string, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	grace := fs.Duration("stop-grace", 5*time.Second, "time the kernel has to exit after a shutdown request, and again after SIGTERM")
	startTimeout := fs.Duration("start-timeout", 2*time.Minute, "time the kernel has to answer its first kernel_info_request")
	heartbeat := fs.Duration("heartbeat-interval", 5*time.Second, "how often the kernel's heartbeat is checked; three misses report it dead")
	verbosity := fs.Int("v", 0, "log verbosity (1: client connections and dropped messages)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := logr.FromSlogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.Level(-*verbosity)})).WithName("agent")
	kernelID := getenv(EnvKernelID)
	if kernelID == "" {
		return errors.New(EnvKernelID + " is not set: the agent runs in kernel pods")
	}
	port := getenv(EnvAgentPort)
	if port == "" {
		return errors.New(EnvAgentPort + " is not set")
	}
	ipythonDir := getenv("IPYTHONDIR")
	if ipythonDir == "" {
		ipythonDir = filepath.Join(getenv("HOME"), ".ipython")
	}
	return Run(ctx, Config{
		KernelID:   kernelID,
		Listen:     net.JoinHostPort(getenv(EnvPodIP), port),
		SecretDir:  getenv(EnvSecretDir),
		Argv:       fs.Args(),
		RuntimeDir: os.TempDir(),
		StopGrace:  *grace,
		// The kernel spec's interrupt_mode; the builder always sets it.
		InterruptMode:     getenv(EnvInterruptMode),
		StartTimeout:      *startTimeout,
		HeartbeatInterval: *heartbeat,
		TerminationLog:    getenv(EnvTerminationLog),
		Cluster:           ClusterConfig{Profile: getenv(EnvClusterProfile), File: getenv(EnvClusterFile), IPythonDir: ipythonDir},
		Log:               log,
	})
}
