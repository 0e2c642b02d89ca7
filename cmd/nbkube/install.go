package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nbkube/nbkube/agent"
)

// runInstall copies a binary of the operator's image to the destination: the kernel pod's
// init container puts the agent into an emptyDir that the kernel's image then runs it from.
// The binary is the one beside this one with the destination's name (nbkube-agent), or this
// one. A hard link is tried first (the local node runs pods on the same filesystem), then a
// copy; either way the file appears at once and whole.
func runInstall(_ context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: nbkube install DEST")
	}
	dest := args[0]
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if sibling := filepath.Join(filepath.Dir(self), filepath.Base(dest)); filepath.Base(dest) != filepath.Base(self) {
		if _, err := os.Stat(sibling); err != nil {
			return fmt.Errorf("install %s: %w (make build puts nbkube-agent beside nbkube)", dest, err)
		}
		self = sibling
	}
	return agent.Install(self, dest)
}
