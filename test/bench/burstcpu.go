package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// burstRound is one round of twenty kernels started at once on a server: how long it took and
// the CPU each kind of process below the server spent from the first POST until the last
// kernel answered.
type burstRound struct {
	elapsed time.Duration
	cpu     map[string]time.Duration
}

// procCPU is a process's name (as procName, "server" for the server's own process) and CPU.
type procCPU struct {
	name string
	cpu  time.Duration
}

// treeCPU reads the CPU time of root and every process below it.
func treeCPU(root int) (map[int]procCPU, error) {
	pids, err := descendants(root)
	if err != nil {
		return nil, err
	}
	times, err := cpuTimes(pids)
	if err != nil {
		return nil, err
	}
	out := make(map[int]procCPU, len(times))
	for pid, t := range times {
		name := procName(pid)
		switch {
		case pid == root:
			name = "server"
		case strings.HasPrefix(name, "python"):
			name = "Python"
		}
		out[pid] = procCPU{name: name, cpu: t}
	}
	return out, nil
}

// spentByName is the CPU spent between two readings, summed by process name; a process that
// started in between counts whole, one that exited in between not at all.
func spentByName(before, after map[int]procCPU) map[string]time.Duration {
	out := map[string]time.Duration{}
	for pid, p := range after {
		d := p.cpu
		if b, ok := before[pid]; ok && b.name == p.name {
			d -= b.cpu
		}
		out[p.name] += d
	}
	return out
}

// medianBurst is the round with the median time.
func medianBurst(rounds []burstRound) burstRound {
	sorted := slices.SortedFunc(slices.Values(rounds), func(a, b burstRound) int { return cmp.Compare(a.elapsed, b.elapsed) })
	return sorted[len(sorted)/2]
}

// formatBurst writes a round's CPU as "total: the largest first", the server's own process
// named serverName.
func formatBurst(r burstRound, serverName string) string {
	type entry struct {
		name string
		cpu  time.Duration
	}
	var entries []entry
	var total time.Duration
	for name, d := range r.cpu {
		if name == "server" {
			name = serverName
		}
		entries = append(entries, entry{name, d})
		total += d
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Or(cmp.Compare(b.cpu, a.cpu), strings.Compare(a.name, b.name)) })
	parts := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.cpu >= 50*time.Millisecond {
			parts = append(parts, fmt.Sprintf("%s %.1f", e.name, e.cpu.Seconds()))
		}
	}
	return fmt.Sprintf("%.1f in all (round of %.1f s): %s", total.Seconds(), r.elapsed.Seconds(), strings.Join(parts, ", "))
}
