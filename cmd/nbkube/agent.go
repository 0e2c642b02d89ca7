package main

import (
	"context"
	"errors"
	"net"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nbkube/nbkube/agent"
	"github.com/nbkube/nbkube/internal/builder"
)

// runAgent runs in the kernel pod. Its settings come from the environment the kernel pod
// builder sets (NBKUBE_*), the kernel's command line after "--".
func runAgent(ctx context.Context, args []string) error {
	fs, logOpts := newFlagSet("agent")
	grace := fs.Duration("stop-grace", 5*time.Second, "time the kernel has to exit after a shutdown request, and again after SIGTERM")
	startTimeout := fs.Duration("start-timeout", 2*time.Minute, "time the kernel has to answer its first kernel_info_request")
	heartbeat := fs.Duration("heartbeat-interval", 5*time.Second, "how often the kernel's heartbeat is checked; three misses report it dead")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(logOpts)))
	kernelID := os.Getenv(builder.EnvKernelID)
	if kernelID == "" {
		return errors.New(builder.EnvKernelID + " is not set: the agent runs in kernel pods")
	}
	port := os.Getenv(builder.EnvAgentPort)
	if port == "" {
		return errors.New(builder.EnvAgentPort + " is not set")
	}
	return agent.Run(ctx, agent.Config{
		KernelID:   kernelID,
		Listen:     net.JoinHostPort(os.Getenv(builder.EnvPodIP), port),
		SecretDir:  os.Getenv(builder.EnvSecretDir),
		Argv:       fs.Args(),
		RuntimeDir: os.TempDir(),
		StopGrace:  *grace,
		// The kernel spec's interrupt_mode; the builder always sets it.
		InterruptMode:     os.Getenv(builder.EnvInterruptMode),
		StartTimeout:      *startTimeout,
		HeartbeatInterval: *heartbeat,
		Log:               ctrl.Log.WithName("agent"),
	})
}
