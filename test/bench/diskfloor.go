package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The floors of the contents rows at one client: what the file system alone takes for the
// durable steps of a save and a checkpoint, on the file system of the servers' roots, and the
// cheapest request nbkube answers. No server can answer a durable save or checkpoint faster
// than its disk step plus such a request; Jupyter Server's checkpoint is an unsynced copy, so
// it has no such floor.

// floorPrefix marks the floors among the contents results.
const floorPrefix = "floor:"

// floors are the floors' rows, in the report's order.
var floors = []struct{ name, title string }{
	{"replace-mixed", "durable replace of the 60 KB notebook (create, write, fsync, rename, fsync the directory)"},
	{"replace-plots", "durable replace of the 5.4 MB notebook"},
	{"link", "durable link (link, fsync the directory)"},
	{"status", "nbkube's cheapest request (GET /api/status)"},
}

// floorOps are the floors' operations by name, in dir and on nbkube (s); one call is one
// operation, i counting from 0. done closes what they hold.
func floorOps(dir string, s *server) (ops map[string]func(i int) error, done func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, nil, err
	}
	dfd := int(d.Fd())
	// A durable replace, as a save makes it: a new file written and synced, renamed over the
	// old, the directory synced.
	replace := func(data []byte) func(int) error {
		return func(int) error {
			fd, err := unix.Openat(dfd, "tmp", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
			if err != nil {
				return err
			}
			defer func() { _ = unix.Close(fd) }()
			for rest := data; len(rest) > 0; {
				n, err := unix.Write(fd, rest)
				if err != nil {
					return err
				}
				rest = rest[n:]
			}
			if err := unix.Fsync(fd); err != nil {
				return err
			}
			if err := unix.Renameat(dfd, "tmp", dfd, "notebook.ipynb"); err != nil {
				return err
			}
			return unix.Fsync(dfd)
		}
	}
	// A durable link, as a checkpoint makes it where there are no reflinks: a new name for the
	// synced file, the directory synced; the oldest names beyond five are removed unsynced, as
	// a store prunes checkpoints.
	linked := filepath.Join(dir, "linked.ipynb")
	if err := os.WriteFile(linked, mixedNotebook(), 0o644); err != nil {
		return nil, nil, err
	}
	link := func(i int) error {
		if err := unix.Linkat(unix.AT_FDCWD, linked, dfd, "cp-"+strconv.Itoa(i), 0); err != nil {
			return err
		}
		if err := unix.Fsync(dfd); err != nil {
			return err
		}
		if i >= 5 {
			return unix.Unlinkat(dfd, "cp-"+strconv.Itoa(i-5), 0)
		}
		return nil
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	status := func(int) error {
		req, err := http.NewRequest(http.MethodGet, s.base+"api/status", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "token "+s.token)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body) // so that the connection is used again
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /api/status: %s", resp.Status)
		}
		return nil
	}
	ops = map[string]func(int) error{
		"replace-mixed": replace(mixedNotebook()), "replace-plots": replace(plotsNotebook()), "link": link, "status": status,
	}
	return ops, func() { d.Close(); hc.CloseIdleConnections() }, nil
}

// measureDiskFloor runs op back to back for d, after a warm-up of d/5.
func measureDiskFloor(op func(int) error, d time.Duration) (result, error) {
	var lat []time.Duration
	start := time.Now()
	warm, end := start.Add(d/5), start.Add(d/5+d)
	for i := 0; time.Now().Before(end); i++ {
		t0 := time.Now()
		if err := op(i); err != nil {
			return result{}, err
		}
		if t0.After(warm) {
			lat = append(lat, time.Since(t0))
		}
	}
	if len(lat) == 0 {
		return result{}, errors.New("nothing measured")
	}
	slices.Sort(lat)
	return result{rps: float64(len(lat)) / d.Seconds(), p50: lat[len(lat)/2], p99: lat[len(lat)*99/100]}, nil
}

// measureFloors adds the floors to results, under floorPrefix.
func measureFloors(results map[string]map[string]result, dir string, nb *server, d time.Duration) error {
	ops, done, err := floorOps(dir, nb)
	if err != nil {
		return err
	}
	defer done()
	for _, f := range floors {
		r, err := measureDiskFloor(ops[f.name], d)
		if err != nil {
			return fmt.Errorf("floor %s: %w", f.name, err)
		}
		fmt.Fprintf(os.Stderr, "floor    %-16s c=1   %8.0f op/s   p50 %6.2f ms  p99 %6.2f ms\n", f.name, r.rps, ms(r.p50), ms(r.p99))
		results[floorPrefix+f.name] = map[string]result{"floor": r}
	}
	return nil
}

// writeFloors is the floors' table, under the contents rows; nothing when they were not
// measured.
func writeFloors(b *strings.Builder, results map[string]map[string]result) {
	if _, ok := results[floorPrefix+floors[0].name]; !ok {
		return
	}
	b.WriteString("\nThe floors at one client, measured in the same run on the file system of the servers' roots: a durable save cannot take less than its replace plus a request, a durable checkpoint less than its link plus a request (Jupyter's checkpoint is an unsynced copy, so it has no such floor).\n\n")
	b.WriteString("| floor | p50 / p99 ms | per second |\n|---|---|---|\n")
	for _, f := range floors {
		r := results[floorPrefix+f.name]["floor"]
		fmt.Fprintf(b, "| %s | %.2f / %.2f | %.0f |\n", f.title, ms(r.p50), ms(r.p99), r.rps)
	}
}
