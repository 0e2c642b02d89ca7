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
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/nbkube/nbkube/internal/agentapi"
)

// Main is the agent's command line (`nbkube-agent [flags] -- ARGV...`, also `nbkube agent`):
// flags, then the pod's environment, then Run. It logs JSON lines to stderr. With
// agentapi.CommandRenderRST first it is the reStructuredText renderer instead (RenderRSTMain),
// with agentapi.CommandTerminal a terminal's agent (TerminalMain).
func Main(ctx context.Context, name string, args []string, getenv func(string) string, stderr io.Writer) error {
	if len(args) > 0 && args[0] == agentapi.CommandRenderRST {
		return RenderRSTMain(ctx, name, args[1:], getenv, stderr)
	}
	if len(args) > 0 && args[0] == agentapi.CommandTerminal {
		return TerminalMain(ctx, name, args[1:], getenv, stderr)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	grace := fs.Duration("stop-grace", 5*time.Second, "time the kernel has to exit after a shutdown request, and again after SIGTERM")
	startTimeout := fs.Duration("start-timeout", 2*time.Minute, "time the kernel has to answer its first kernel_info_request")
	heartbeat := fs.Duration("heartbeat-interval", 5*time.Second, "how often the kernel's heartbeat is checked; three misses report it dead")
	memory := fs.Int64("memory-budget", DefaultMemoryBudget, "bytes the agent may hold for clients in the kernel's container (replay buffers, queued output, messages held while the kernel starts); slow clients are cut off beyond it")
	verbosity := fs.Int("v", 0, "log verbosity (1: client connections and dropped messages)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := logr.FromSlogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.Level(-*verbosity)})).WithName("agent")
	kernelID := getenv(agentapi.EnvKernelID)
	if kernelID == "" {
		return errors.New(agentapi.EnvKernelID + " is not set: the agent runs in kernel pods")
	}
	port := getenv(agentapi.EnvAgentPort)
	if port == "" {
		return errors.New(agentapi.EnvAgentPort + " is not set")
	}
	ipythonDir := getenv("IPYTHONDIR")
	if ipythonDir == "" {
		ipythonDir = filepath.Join(getenv("HOME"), ".ipython")
	}
	return Run(ctx, Config{
		KernelID:    kernelID,
		Listen:      net.JoinHostPort(getenv(agentapi.EnvPodIP), port),
		SecretDir:   getenv(agentapi.EnvSecretDir),
		Argv:        fs.Args(),
		ContentsDir: contentsDir(getenv(agentapi.EnvKernelPath)),
		RuntimeDir:  os.TempDir(),
		StopGrace:   *grace,
		// The kernel spec's interrupt_mode; the builder always sets it.
		InterruptMode:     getenv(agentapi.EnvInterruptMode),
		StartTimeout:      *startTimeout,
		HeartbeatInterval: *heartbeat,
		MemoryBudget:      *memory,
		TerminationLog:    getenv(agentapi.EnvTerminationLog),
		ForkServer:        getenv(agentapi.EnvForkServer),
		Cluster:           ClusterConfig{Profile: getenv(agentapi.EnvClusterProfile), File: getenv(agentapi.EnvClusterFile), IPythonDir: ipythonDir},
		Log:               log,
	})
}

// contentsDir is the kernel's contents directory: its working directory, which is kernelPath
// (EnvKernelPath) below it, as far up as kernelPath goes down. Empty when the working
// directory does not end in kernelPath (a pod made otherwise): nothing is written then.
func contentsDir(kernelPath string) string {
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	return contentsDirOf(wd, kernelPath)
}

func contentsDirOf(wd, kernelPath string) string {
	rel := filepath.Clean("/" + kernelPath)
	if rel == "/" {
		return wd
	}
	root, found := strings.CutSuffix(wd, rel)
	if !found {
		return ""
	}
	if root == "" {
		return "/"
	}
	return root
}
