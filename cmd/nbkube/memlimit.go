package main

import (
	"runtime/debug"
	"strconv"

	"github.com/nbkube/nbkube/apiserver"
)

// memoryLimitShare is the part of the container's memory limit the Go runtime is told to keep
// under (its soft limit, GOMEMLIMIT): the rest is for what the runtime does not count
// (thread stacks in C, the page cache of files the process writes) and for the moment the
// collector needs to catch up.
const memoryLimitShare = 0.9

// softMemoryLimit is the soft memory limit to give the Go runtime, from the container's memory
// limit in NBKUBE_MEMORY_LIMIT (bytes; the chart sets it from the pod's own limit through the
// downward API): a share of it, so that the collector works harder as the limit nears instead
// of the kernel's OOM killer ending the process and every WebSocket on it. False when
// GOMEMLIMIT is set (the runtime took it already) or there is no limit.
func softMemoryLimit(getenv func(string) string) (int64, bool) {
	if getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	limit, err := strconv.ParseInt(getenv("NBKUBE_MEMORY_LIMIT"), 10, 64)
	if err != nil || limit <= 0 {
		return 0, false
	}
	return int64(float64(limit) * memoryLimitShare), true
}

// applyMemoryLimit sets the runtime's soft memory limit (softMemoryLimit) and returns it, or
// zero when none was set.
func applyMemoryLimit(getenv func(string) string) int64 {
	limit, ok := softMemoryLimit(getenv)
	if !ok {
		return 0
	}
	debug.SetMemoryLimit(limit)
	return limit
}

// bodyMemoryShare is the part of the container's memory limit that the request bodies being
// handled at once may take (apiserver.Options.BodyMemory): the rest is for WebSockets, caches
// and the runtime.
const bodyMemoryShare = 0.25

// defaultBodyMemory is the API server's budget for request bodies: a share of the container's
// memory limit (NBKUBE_MEMORY_LIMIT) when there is one, apiserver.DefaultBodyMemory otherwise.
func defaultBodyMemory(getenv func(string) string) int64 {
	limit, err := strconv.ParseInt(getenv("NBKUBE_MEMORY_LIMIT"), 10, 64)
	if err != nil || limit <= 0 {
		return apiserver.DefaultBodyMemory
	}
	return int64(float64(limit) * bodyMemoryShare)
}
