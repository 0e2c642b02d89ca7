package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// kernelMemory is what the Kernel controller keeps of each kernel between reconciles, beside
// the Kernel itself: one record per kernel, under one lock, which forget drops whole once
// the kernel is gone. What each part is for is told where it is used.
type kernelMemory struct {
	mu      sync.Mutex
	kernels map[types.NamespacedName]*kernelRecord
	// starts counts the records timing a start, which maxTrackedStarts bounds.
	starts int
	// running counts the records of running kernels, whose agents are polled
	// (statusPollInterval).
	running int
}

// kernelRecord is what is kept of one kernel; a record with nothing in it is dropped.
type kernelRecord struct {
	// start is the kernel's start being timed (kernel_starts.go).
	start *kernelStart
	// replay is what its agent holds for replay, in the gauge of its spec (metrics.go).
	replay *replayShare
	// heldSince is since when a routine status write waits unwritten (kernel_hold.go).
	heldSince time.Time
	// own are the controller's last status writes (kernel_ownwrites.go).
	own *ownWrite
	// running: its agent is polled (statuspoll.go).
	running bool
}

func (r *kernelRecord) empty() bool {
	return r.start == nil && r.replay == nil && r.heldSince.IsZero() && r.own == nil && !r.running
}

// with runs fn under the lock on the kernel's record, made for it if it has none, and keeps
// the counts of starts and running kernels.
func (m *kernelMemory) with(key types.NamespacedName, fn func(*kernelRecord)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.kernels[key]
	if rec == nil {
		rec = &kernelRecord{}
	}
	timing, running := rec.start != nil, rec.running
	fn(rec)
	m.starts += count(rec.start != nil) - count(timing)
	m.running += count(rec.running) - count(running)
	switch {
	case rec.empty():
		delete(m.kernels, key)
	case m.kernels == nil:
		m.kernels = map[types.NamespacedName]*kernelRecord{key: rec}
	default:
		m.kernels[key] = rec
	}
}

func count(b bool) int {
	if b {
		return 1
	}
	return 0
}

// forget drops what is kept of a kernel that is gone or going.
func (m *kernelMemory) forget(key types.NamespacedName) {
	m.with(key, func(rec *kernelRecord) {
		rec.dropReplay()
		*rec = kernelRecord{}
	})
}
