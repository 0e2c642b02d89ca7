package main

import (
	"context"
	"os"

	"github.com/nbkube/nbkube/agent"
)

// runAgent is `nbkube agent`, the same agent as the nbkube-agent binary that kernel pods run.
func runAgent(ctx context.Context, args []string) error {
	return agent.Main(ctx, "nbkube agent", args, os.Getenv, os.Stderr)
}
