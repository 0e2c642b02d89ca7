package identity

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// ThrottleOptions say how a Throttle slows guessing down.
type ThrottleOptions struct {
	// Free is how many failures a key has before the first delay.
	Free int
	// Delay is the first delay, after the Free-th failure; each further failure doubles it.
	Delay time.Duration
	// MaxDelay bounds the delay.
	MaxDelay time.Duration
	// Forgive forgives one failure per Forgive, so that a steady trickle of mistakes (the
	// typos of many people behind one address) never adds up to a delay; 0 forgives none.
	Forgive time.Duration
	// Forget drops a key's failures after that long without one.
	Forget time.Duration
	// Size bounds the keys remembered; the least recently used go first.
	Size int
	// Clock is the real clock when nil.
	Clock clock.PassiveClock
}

// Throttle slows down the guessing of credentials: after a key's (a user name's, a client
// address's) Free failures, every further attempt waits for a delay that doubles with each
// failure, up to MaxDelay. Attempts of a key beyond its free failures go one at a time, so
// that a burst of concurrent guesses cannot slip past before the first failure counts. Its
// memory is bounded: at most Size keys, each forgotten after Forget.
type Throttle struct {
	o       ThrottleOptions
	mu      sync.Mutex
	entries *cache.LRUExpireCache
}

// throttled is one key's record; guarded by Throttle.mu.
type throttled struct {
	// failures counts failures not yet forgiven; forgiven is when the last was.
	failures  int
	forgiven  time.Time
	inFlight  int
	waitUntil time.Time
}

// NewThrottle makes a throttle.
func NewThrottle(o ThrottleOptions) *Throttle {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Throttle{o: o, entries: cache.NewLRUExpireCacheWithClock(max(1, o.Size), o.Clock)}
}

// entry is key's record, made when missing, with the failures Forgive has forgiven since
// taken away. Call with mu held.
func (t *Throttle) entry(key string, now time.Time) *throttled {
	v, ok := t.entries.Get(key)
	if !ok {
		e := &throttled{forgiven: now}
		t.entries.Add(key, e, t.o.Forget)
		return e
	}
	e := v.(*throttled)
	if t.o.Forgive > 0 && e.failures > 0 {
		n := int(now.Sub(e.forgiven) / t.o.Forgive)
		e.failures = max(0, e.failures-n)
		e.forgiven = e.forgiven.Add(time.Duration(n) * t.o.Forgive)
	}
	if e.failures == 0 {
		e.forgiven = now
	}
	return e
}

// Begin starts an attempt of each key: it returns 0 when the attempt may go on, and then
// End must follow; otherwise how long to wait before trying again, and the attempt is not
// counted. Empty keys are left out.
func (t *Throttle) Begin(keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.o.Clock.Now()
	var wait time.Duration
	for _, k := range keys {
		if k == "" {
			continue
		}
		e := t.entry(k, now)
		switch {
		case now.Before(e.waitUntil):
			wait = max(wait, e.waitUntil.Sub(now))
		case e.failures+e.inFlight >= t.o.Free && e.inFlight > 0:
			// Another attempt is being checked; its outcome sets the next delay.
			wait = max(wait, time.Second)
		}
	}
	if wait > 0 {
		return wait
	}
	for _, k := range keys {
		if k != "" {
			t.entry(k, now).inFlight++
		}
	}
	return 0
}

// End ends an attempt that Begin let go on. A failure counts against every key and sets its
// next delay; a success clears the keys in reset (the user name that logged in) and leaves
// the others' failures to Forgive and Forget.
func (t *Throttle) End(failed bool, keys []string, reset ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.o.Clock.Now()
	for _, k := range keys {
		if k == "" {
			continue
		}
		e := t.entry(k, now)
		e.inFlight = max(0, e.inFlight-1)
		if failed {
			e.failures++
			if e.failures >= t.o.Free {
				e.waitUntil = now.Add(t.delay(e.failures - t.o.Free))
			}
		}
		// Re-added so that the key is kept Forget past its last attempt, or past its delay.
		t.entries.Add(k, e, max(t.o.Forget, e.waitUntil.Sub(now)))
	}
	if failed {
		return
	}
	for _, k := range reset {
		if k != "" {
			t.entries.Remove(k)
		}
	}
}

// delay is the delay after n failures beyond the free ones: Delay doubled n times, at most
// MaxDelay.
func (t *Throttle) delay(n int) time.Duration {
	d := t.o.Delay
	for range n {
		if d >= t.o.MaxDelay/2 {
			return t.o.MaxDelay
		}
		d *= 2
	}
	return min(d, t.o.MaxDelay)
}
