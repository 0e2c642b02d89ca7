package localnode

import "time"

// crashBackOff is the kubelet's restart back-off for one container (flowcontrol.Backoff as
// kuberuntime uses it): the first restart is immediate, each later one waits base, 2×base, ...
// up to max after the container finished, and a container that ran for longer than 2×max since
// its last restart starts over with an immediate restart.
type crashBackOff struct {
	base, max time.Duration
	// delay is the wait before the next restart once one has happened; zero before the first.
	delay       time.Duration
	lastRestart time.Time
}

func (b *crashBackOff) expired(finishedAt time.Time) bool {
	return b.delay == 0 || finishedAt.Sub(b.lastRestart) > 2*b.max
}

// restartAt tells when a container that finished at finishedAt may start again, and the back-off
// it waits for (zero when it may start at once).
func (b *crashBackOff) restartAt(finishedAt time.Time) (time.Time, time.Duration) {
	if b.expired(finishedAt) {
		return finishedAt, 0
	}
	return finishedAt.Add(b.delay), b.delay
}

// restarted records that the container, which had finished at finishedAt, started again at now.
func (b *crashBackOff) restarted(finishedAt, now time.Time) {
	if b.expired(finishedAt) {
		b.delay = b.base
	} else {
		b.delay = min(2*b.delay, b.max)
	}
	b.lastRestart = now
}
