package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultMaxStatusPolls is Options.MaxStatusPolls when zero: a thousand running kernels are
// asked every 10 s (DefaultStatusInterval), ten thousand every 100 s.
const DefaultMaxStatusPolls = 100

// statusPollInterval is how long a running kernel waits for its agent's next status
// request: interval, or longer when running kernels asked at that pace would make more than
// maxPolls requests a second in all. What the poll keeps fresh is Kernel.status, for kubectl
// and the metrics: the API server and the culler ask an agent themselves when they need to
// know, so a slower poll costs an admin some staleness and nobody a wrong answer.
func statusPollInterval(interval time.Duration, running int, maxPolls float64) time.Duration {
	if maxPolls <= 0 {
		return interval
	}
	return max(interval, time.Duration(float64(running)/maxPolls*float64(time.Second)))
}

// runningKernels counts the kernels whose agents are polled.
type runningKernels struct {
	mu  sync.Mutex
	set map[types.NamespacedName]struct{}
}

// mark records whether the kernel runs and returns how many do.
func (r *runningKernels) mark(key types.NamespacedName, running bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if running {
		if r.set == nil {
			r.set = map[types.NamespacedName]struct{}{}
		}
		r.set[key] = struct{}{}
	} else {
		delete(r.set, key)
	}
	return len(r.set)
}
