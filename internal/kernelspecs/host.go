package kernelspecs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// nativeKernel is the spec Jupyter offers even when no kernel.json names it, from the
// server's own ipykernel (jupyter_client's NATIVE_KERNEL_NAME).
const nativeKernel = "python3"

// Host keeps the KernelSpecs made from this machine's kernel.json files in step with the
// machine, for `nbkube local`: Jupyter reads the kernel spec directories on every request, so
// a kernel installed or removed there shows in the next answer, and users expect the same of
// nbkube. Refresh is cheap when nothing changed: it only stats the files.
type Host struct {
	// Client writes the KernelSpecs. It should not be a cache: readers that want to see a
	// sync's writes at once read through it.
	Client client.Client
	// Namespace holds the KernelSpecs.
	Namespace string
	// Dirs are the kernel spec directories, searched as Find does: Dirs(os.Getenv).
	Dirs []string
	// Python are the interpreters PythonSpec tries for a "python3" spec when no kernel.json
	// provides one, as Jupyter adds ipykernel's own spec; none means no such spec.
	Python []string

	mu sync.Mutex
	// synced is the fingerprint of the directories the last successful sync wrote; nil
	// before the first.
	synced *string
	// lastSync is when a sync last ended, successful or not.
	lastSync time.Time
}

// SyncedWithin tells whether a sync ended within the last d, so that its writes may not have
// reached a cache yet.
func (h *Host) SyncedWithin(d time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.lastSync.IsZero() && time.Since(h.lastSync) < d
}

// Refresh syncs the host's kernel specs into KernelSpecs (see Sync) when the directories
// changed since the last successful sync, and on the first call. It reports whether it
// synced and, if so, the Jupyter names now offered from the host; err joins the specs it
// skipped (malformed, or with a name no KernelSpec can have) and the writes that failed.
// After failed writes the next call tries again. Files of a spec left out of its ConfigMap
// are logged.
func (h *Host) Refresh(ctx context.Context) (names []string, synced bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fp := fingerprint(h.Dirs)
	if h.synced != nil && *h.synced == fp {
		return nil, false, nil
	}
	specs, problems := Find(h.Dirs)
	// Names no KernelSpec can have are skipped here rather than by Sync, so that they do not
	// count as failed writes and make every later call sync again.
	specs = slices.DeleteFunc(specs, func(s Spec) bool {
		_, _, err := Names(s.Name)
		if err != nil {
			problems = append(problems, err)
		}
		return err != nil
	})
	for _, s := range specs {
		if len(s.Skipped) > 0 {
			log.FromContext(ctx).Info("Files of a kernel spec left out: a ConfigMap cannot hold them", "kernel", s.Name, "files", s.Skipped)
		}
	}
	if len(h.Python) > 0 && !slices.ContainsFunc(specs, func(s Spec) bool { return strings.EqualFold(s.Name, nativeKernel) }) {
		if py, ok := PythonSpec(ctx, h.Python); ok {
			specs = append(specs, py)
		}
	}
	names, err = Sync(ctx, h.Client, h.Namespace, specs)
	h.lastSync = time.Now()
	if err == nil {
		h.synced = &fp
	}
	return names, true, errors.Join(append(problems, err)...)
}

// fingerprint sums up what Find would read under dirs: the name, size and modification time
// of every file at the top of every spec directory. Comparing it is enough to tell that a spec
// or one of its files was added, removed or edited, without reading or parsing any file.
func fingerprint(dirs []string) string {
	var b strings.Builder
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			files, err := os.ReadDir(filepath.Join(dir, e.Name()))
			if err != nil {
				continue
			}
			for _, f := range files {
				p := filepath.Join(dir, e.Name(), f.Name())
				if st, err := os.Stat(p); err == nil && !st.IsDir() {
					fmt.Fprintf(&b, "%s\x00%d\x00%d\n", p, st.Size(), st.ModTime().UnixNano())
				}
			}
		}
	}
	return b.String()
}
