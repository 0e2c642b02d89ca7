package main

// What the kernel scenarios read of processes from /proc: resident and proportional memory,
// CPU time, and the agents under nbkube's process.

import (
	"bytes"
	_ "embed" // floor.py
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// serverRSS is the resident memory of Jupyter Server's process, which holds every kernel's
// connections; nbkube's memory per kernel is its agents', measured directly.
func (c *kernelClient) serverRSS() (int64, error) {
	if c.s.name == "nbkube" {
		return 0, nil
	}
	return rss(c.s.pid)
}

// rssPerKernel is scenario 6 with n kernels running: the mean RSS of nbkube's agents, or
// Jupyter Server's growth over before, when it had no kernel, divided by n.
func (c *kernelClient) rssPerKernel(before int64, beforeErr error, n int) (rssResult, error) {
	if c.s.name != "nbkube" {
		if beforeErr != nil {
			return rssResult{}, beforeErr
		}
		after, err := rss(c.s.pid)
		if err != nil {
			return rssResult{}, err
		}
		return rssResult{
			perKernel: float64(after-before) / float64(n),
			how:       fmt.Sprintf("process %.0f → %.0f MiB with %d kernels", float64(before)/(1<<20), float64(after)/(1<<20), n),
		}, nil
	}
	agents, err := agentPIDs(c.s.pid)
	if err != nil {
		return rssResult{}, err
	}
	var sum, largest, pss int64
	for _, pid := range agents {
		r, err := rss(pid)
		if err != nil {
			return rssResult{}, err
		}
		p, err := proportionalSet(pid)
		if err != nil {
			return rssResult{}, err
		}
		sum += r
		pss += p
		largest = max(largest, r)
	}
	found := float64(len(agents))
	return rssResult{
		perKernel: float64(sum) / found,
		how: fmt.Sprintf("mean of %d agents, largest %.1f MiB; PSS %.1f MiB", len(agents),
			float64(largest)/(1<<20), float64(pss)/found/(1<<20)),
	}, nil
}

// agentPIDs finds the agent processes (`nbkube-agent -- <kernel argv>`) below root, the process of
// `nbkube local`, which runs the containers of kernel pods as its own children.
func agentPIDs(root int) ([]int, error) {
	tree, err := descendants(root)
	if err != nil {
		return nil, err
	}
	var agents []int
	for _, pid := range tree[1:] {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		// `nbkube agent -- <argv>` or `.../nbkube-agent -- <argv>`: "agent" before the "--",
		// which keeps the kernel's own arguments out of the match.
		own, _, found := strings.Cut(string(cmdline), "\x00--\x00")
		if found && strings.Contains(own, "agent") {
			agents = append(agents, pid)
		}
	}
	if len(agents) == 0 {
		return nil, fmt.Errorf("no nbkube-agent process below process %d", root)
	}
	return agents, nil
}

// waitQuiet waits (at most a minute) until every server's process is idle: after the
// contents load, Jupyter Server goes on working through queued requests for seconds, and
// kernel starts measured meanwhile (for either server) would pay for it.
func waitQuiet(servers []*server) {
	var pids []int
	for _, s := range servers {
		pids = append(pids, s.pid)
	}
	start := time.Now()
	for time.Since(start) < time.Minute {
		before, err := cpuTimes(pids)
		if err != nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
		after, err := cpuTimes(pids)
		if err != nil {
			return
		}
		// Under 5 % of a core over the half second: 2 ticks of 10 ms.
		if cpuSpent(before, after) <= 20*time.Millisecond {
			break
		}
	}
	if waited := time.Since(start); waited > time.Second {
		fmt.Fprintf(os.Stderr, "bench: waited %.1f s for the servers to go idle\n", waited.Seconds())
	}
}

// procStat returns the fields of /proc/<pid>/stat from the third (state) on; the second, the
// command name in parentheses, may hold spaces.
func procStat(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}

// cpuTimes reads the user and system CPU time of the processes, all their threads included.
// Processes that exited are left out.
func cpuTimes(pids []int) (map[int]time.Duration, error) {
	times := map[int]time.Duration{}
	for _, pid := range pids {
		f, err := procStat(pid)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		// utime and stime are the 14th and 15th fields of the line.
		var ticks int64
		for _, s := range f[11:13] {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/%d/stat: %w", pid, err)
			}
			ticks += n
		}
		times[pid] = time.Duration(ticks) * time.Second / clockTicks
	}
	if len(times) == 0 && len(pids) > 0 {
		return nil, fmt.Errorf("processes %v exited", pids)
	}
	return times, nil
}

// cpuSpent is the CPU time the processes read both times spent in between.
func cpuSpent(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range after {
		if t0, ok := before[pid]; ok {
			d += t - t0
		}
	}
	return d
}

// rss is the resident set size of a process.
func rss(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/statm: %q", pid, data)
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/statm: %w", pid, err)
	}
	return pages * int64(os.Getpagesize()), nil
}

// proportionalSet is a process's PSS: its RSS with each page shared with other processes
// counted as a share. nbkube local runs every agent from the same binary, whose pages the agents
// share; in a cluster each kernel pod copies the binary into its own volume and shares nothing.
func proportionalSet(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "Pss:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/smaps_rollup: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/smaps_rollup: no Pss", pid)
}
