// Package jpserver does what a Jupyter server process does on its machine, beyond its API, so
// that Jupyter's own tools take nbkube local for one: it leaves the server info file
// (jpserver-<pid>.json) in Jupyter's runtime directory, which `jupyter server list` and the
// editors that find running servers read, and it looks for a free port when the usual one is
// taken (ServerApp.port_retries).
//
// The info file holds the token, so it is readable by its owner only, in a directory only its
// owner can enter, and it appears whole (written aside, then renamed) so that a reader never
// sees half of it. It is removed when the server stops; after a crash `jupyter server list`
// finds its process gone and deletes it, as it does for Jupyter's own.
package jpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Info is the content of the server info file, Jupyter Server's ServerApp.server_info().
type Info struct {
	// URL is the server's URL without the token, ending in the base URL.
	URL string `json:"url"`
	// Hostname is the address listened on, "localhost" when none is named.
	Hostname string `json:"hostname"`
	Port     int    `json:"port"`
	// Sock is the Unix socket listened on; nbkube listens on TCP only.
	Sock string `json:"sock"`
	// Secure is true for HTTPS.
	Secure  bool   `json:"secure"`
	BaseURL string `json:"base_url"`
	Token   string `json:"token"`
	RootDir string `json:"root_dir"`
	// Password is true when a password is set; nbkube has tokens only.
	Password bool   `json:"password"`
	PID      int    `json:"pid"`
	Version  string `json:"version"`
}

// RuntimeDir is Jupyter's runtime directory as jupyter_core.paths.jupyter_runtime_dir() finds
// it on Linux: $JUPYTER_RUNTIME_DIR, else runtime/ in the data directory ($JUPYTER_DATA_DIR,
// else $XDG_DATA_HOME/jupyter, else ~/.local/share/jupyter, with the home directory's symbolic
// links resolved).
func RuntimeDir(getenv func(string) string) (string, error) {
	if dir := getenv("JUPYTER_RUNTIME_DIR"); dir != "" {
		return dir, nil
	}
	data := getenv("JUPYTER_DATA_DIR")
	if data == "" {
		xdg := getenv("XDG_DATA_HOME")
		if xdg == "" {
			home := getenv("HOME")
			if home == "" {
				return "", errors.New("no Jupyter runtime directory: neither $JUPYTER_RUNTIME_DIR nor $HOME is set")
			}
			if real, err := filepath.EvalSymlinks(home); err == nil {
				home = real
			}
			xdg = filepath.Join(home, ".local", "share")
		}
		data = filepath.Join(xdg, "jupyter")
	}
	return filepath.Join(data, "runtime"), nil
}

// FileName is the info file's name for the process pid.
func FileName(pid int) string { return fmt.Sprintf("jpserver-%d.json", pid) }

// Write writes info into dir as FileName(info.PID), creating dir as Jupyter does (mode 0700)
// when it is missing, and returns the file's path.
func Write(dir string, info Info) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return "", err
	}
	// The temporary name starts with a dot: `jupyter server list` reads every name that
	// matches jpserver-(.+).json, a half-written one too.
	tmp, err := os.CreateTemp(dir, ".jpserver-*.tmp")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600 already; Chmod says so whatever the umask did.
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	path := filepath.Join(dir, FileName(info.PID))
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}

// Remove removes the info file at path; one that is gone already is no error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
