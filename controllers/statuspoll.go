package controllers

import (
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

// markRunning records whether the kernel runs and returns how many do.
func (m *kernelMemory) markRunning(key types.NamespacedName, running bool) (n int) {
	m.with(key, func(rec *kernelRecord) {
		// with counts the change once fn returns.
		n = m.running + count(running) - count(rec.running)
		rec.running = running
	})
	return n
}
