package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Install puts the binary src at dest, as the kernel pod's init container does with the
// agent: a hard link when both are on one filesystem (the local node), else a copy; either
// way dest appears at once and whole.
func Install(src, dest string) error {
	tmp := filepath.Join(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp")
	_ = os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		if err := copyFile(src, tmp); err != nil {
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
