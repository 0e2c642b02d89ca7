package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// linkClusterFile puts the client connection file of the kernel's ipyparallel cluster where
// ipyparallel looks for it: in the IPython profile named after the cluster, so that
// ipyparallel.Client(profile=<cluster>) works, and in the default profile unless that has one
// of its own, so that ipyparallel.Client() does. The links point into the Secret volume, which
// the kubelet updates in place: a kernel started before its cluster, or whose cluster's
// ipcontroller moved, sees the current file without a restart (ipyparallel waits for a file
// that is not there yet).
func linkClusterFile(ipythonDir, profile, file string) error {
	for _, p := range []string{profile, "default"} {
		security := filepath.Join(ipythonDir, "profile_"+p, "security")
		if err := os.MkdirAll(security, 0o700); err != nil {
			return fmt.Errorf("cluster connection file: %w", err)
		}
		link := filepath.Join(security, "ipcontroller-client.json")
		if _, err := os.Lstat(link); err == nil {
			if p == "default" {
				continue
			}
			if err := os.Remove(link); err != nil {
				return fmt.Errorf("cluster connection file: %w", err)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("cluster connection file: %w", err)
		}
		if err := os.Symlink(file, link); err != nil {
			return fmt.Errorf("cluster connection file: %w", err)
		}
	}
	return nil
}
