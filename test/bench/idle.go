package main

// The embedded default at rest (issue 25): a fresh `nbkube local`, ready and without kernels,
// costs its user memory and CPU for as long as it runs. This reads both for every process of
// its tree: nbkube itself, the control plane it runs as children (etcd, kube-apiserver,
// kube-controller-manager) and the pods of its local node (the reStructuredText renderer).

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	// idleSettle is how long the tree is left alone after nbkube answers before the window:
	// the start's own work (kernel specs, the renderer's pod, the controller manager's first
	// discovery) is over by then.
	idleSettle = 20 * time.Second
	// idleWindow is the window the CPU is measured over.
	idleWindow = 20 * time.Second
)

// idleReport is the tree of `nbkube local` at rest.
type idleReport struct {
	procs []idleProc
	// inUseErr is why the binaries' pages in use at rest were not measured.
	inUseErr error
	window   time.Duration
	startup  time.Duration // from the start of nbkube to its first answer
	load     string        // the machine's load average before the window
	err      error
}

// idleProc is one process of the tree.
type idleProc struct {
	name      string
	rss, file int64 // resident bytes; of those, the pages of files it maps (its binary's)
	// fileInUse is file after the binary's pages were reclaimed and a window at rest passed:
	// the pages it uses at rest.
	fileInUse int64
	cpu       time.Duration // CPU time spent in the window
}

func measureIdle(bin, dir string) *idleReport {
	r := &idleReport{}
	r.err = r.measure(bin, dir)
	if r.err != nil {
		fmt.Fprintln(os.Stderr, "bench: idle:", r.err)
	}
	return r
}

func (r *idleReport) measure(bin, dir string) error {
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	started := time.Now()
	s, err := launchNbkube(bin, dir, root)
	if err != nil {
		return err
	}
	defer s.stop()
	r.startup = time.Since(started)
	time.Sleep(idleSettle)
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.load = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	pids, err := descendants(s.pid)
	if err != nil {
		return err
	}
	before, err := cpuTimes(pids)
	if err != nil {
		return err
	}
	t0 := time.Now()
	time.Sleep(idleWindow)
	after, err := cpuTimes(pids)
	if err != nil {
		return err
	}
	r.window = time.Since(t0)
	for _, pid := range pids {
		t1, ok := after[pid]
		if !ok {
			return fmt.Errorf("process %d exited during the window", pid)
		}
		rssBytes, err := rss(pid)
		if err != nil {
			return err
		}
		file, err := statusBytes(pid, "RssFile:")
		if err != nil {
			return err
		}
		r.procs = append(r.procs, idleProc{name: procName(pid), rss: rssBytes, file: file, cpu: t1 - before[pid]})
	}
	r.inUseErr = r.measureInUse(pids)
	return nil
}

// measureInUse reads which pages of their binaries the processes use at rest. The start
// touches most of each binary (package initialisation, flags, kube-apiserver building its
// OpenAPI documents), and those pages stay resident until memory runs short. They are
// reclaimed here, as the kernel would reclaim them, and what a window at rest brings back is
// what rest uses.
func (r *idleReport) measureInUse(pids []int) error {
	for _, pid := range pids {
		if err := reclaimExecutable(pid); err != nil {
			return err
		}
	}
	time.Sleep(idleWindow)
	for i, pid := range pids {
		file, err := statusBytes(pid, "RssFile:")
		if err != nil {
			return err
		}
		r.procs[i].fileInUse = file
	}
	return nil
}

// descendants is root and every process below it, root first.
func descendants(root int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStat(pid)
		if err != nil {
			continue // exited meanwhile
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	tree := []int{root}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree, nil
}

// procName is the base name of the process's program, which /proc/<pid>/comm cuts at 15 bytes
// (kube-controller-manager).
func procName(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return strconv.Itoa(pid)
	}
	argv0, _, _ := strings.Cut(string(data), "\x00")
	return filepath.Base(argv0)
}

// statusBytes reads a "<key> <n> kB" line of /proc/<pid>/status.
func statusBytes(pid int, key string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == key && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, key)
}

func writeIdle(b *strings.Builder, r *idleReport) {
	b.WriteString("## At rest\n\n")
	b.WriteString("A fresh `nbkube local` (`go run ./test/bench -only idle`) without kernels: nbkube, the control plane it runs as " +
		"children and its local node's pods (the reStructuredText renderer's agent), read from /proc " +
		fmt.Sprintf("%.0f s after nbkube first answered; CPU over the %.0f s after that. ", idleSettle.Seconds(), idleWindow.Seconds()) +
		"Targets (issue 25): under 250 MiB resident and under 1 % of a core in all.\n\n")
	if r.err != nil {
		fmt.Fprintf(b, "Not measured: %v\n", r.err)
		return
	}
	procs := slices.Clone(r.procs)
	slices.SortStableFunc(procs, func(a, b idleProc) int { return int(b.rss - a.rss) })
	inUse := func(p idleProc) string {
		if r.inUseErr != nil {
			return "n/a"
		}
		return fmt.Sprintf("%.0f", mib(p.fileInUse))
	}
	b.WriteString("| process | RSS MiB | of which its binary's pages | of those, in use at rest | CPU % of a core |\n|---|---|---|---|---|\n")
	var total idleProc
	for _, p := range procs {
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %s | %.2f |\n", p.name, mib(p.rss), mib(p.file), inUse(p), pctCore(p.cpu, r.window))
		total.rss += p.rss
		total.file += p.file
		total.fileInUse += p.fileInUse
		total.cpu += p.cpu
	}
	fmt.Fprintf(b, "| **total** | **%.0f** | %.0f | %s | **%.2f** |\n\n", mib(total.rss), mib(total.file), inUse(total), pctCore(total.cpu, r.window))
	fmt.Fprintf(b, "nbkube answered %.1f s after its start; load average before the window %s. ", r.startup.Seconds(), r.load)
	b.WriteString("CPU is read in clock ticks (10 ms): over 20 s one tick is 0.05 % of a core. " +
		"The binary's pages (RssFile) are the page cache of the executables the processes touched: counted in RSS, " +
		"shared with any other process running the same binary, and dropped first under memory pressure.\n")
	if r.inUseErr != nil {
		fmt.Fprintf(b, "\nThe binaries' pages in use at rest were not measured: %v\n", r.inUseErr)
		return
	}
	anon := total.rss - total.file
	fmt.Fprintf(b, "\nThe start touches most of each binary (package initialisation, flags, kube-apiserver building its OpenAPI documents). "+
		"\"In use at rest\" is what came back in a window of %.0f s after those pages were reclaimed (process_madvise MADV_PAGEOUT on each process's executable, as the kernel reclaims under memory pressure). "+
		"So, with every page only the start used given back, the tree would hold its memory of its own (RSS less the binaries' pages, %.0f MiB) and the binaries' pages in use (%.0f MiB): %.0f MiB.\n",
		idleWindow.Seconds(), mib(anon), mib(total.fileInUse), mib(anon+total.fileInUse))
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func pctCore(cpu, window time.Duration) float64 { return 100 * cpu.Seconds() / window.Seconds() }
