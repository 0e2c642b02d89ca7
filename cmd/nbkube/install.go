package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	tmp := filepath.Join(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp")
	_ = os.Remove(tmp)
	if err := os.Link(self, tmp); err != nil {
		if err := copyFile(self, tmp); err != nil {
			return fmt.Errorf("install %s: %w", dest, err)
		}
	}
	return os.Rename(tmp, dest)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
