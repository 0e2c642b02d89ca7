package agent

import "sync/atomic"

// budget accounts for the bytes the agent holds for clients against Config.MemoryBudget.
// The agent runs in the kernel's container and shares its memory limit: were it to hold
// without bound, a slow client could get the kernel OOM-killed. Three things are charged:
// the replay buffers of sessions that are away, the frames queued for each connection until
// they are written, and the client messages held while the kernel (re)starts. When a charge
// does not fit, what gives first is the oldest replay of sessions that are away, then the
// connection that would be charged (a slow client is cut off, its session stays), then the
// client whose message would be held; never the kernel, whose output is always read.
//
// Frames shared by several connections are charged to each: the figure errs high, never low.
type budget struct {
	limit int64
	n     atomic.Int64
}

// reserve charges n bytes; false, and nothing charged, when they do not fit.
func (b *budget) reserve(n int64) bool {
	for {
		cur := b.n.Load()
		if cur+n > b.limit {
			return false
		}
		if b.n.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// release gives back n bytes that reserve charged.
func (b *budget) release(n int64) {
	if n != 0 {
		b.n.Add(-n)
	}
}

// used is what is charged now.
func (b *budget) used() int64 { return b.n.Load() }

// connShare is the part of the budget one connection's queue may hold: a client that falls
// that far behind is cut off while the others still have room.
const connShare = 4

// reserveLocked charges n bytes, making room by dropping the oldest replay of sessions that
// are away; false when even that does not make them fit. The caller holds a.mu.
func (a *Agent) reserveLocked(n int64) bool {
	for !a.mem.reserve(n) {
		if !a.dropOldestReplayLocked() {
			return false
		}
	}
	return true
}

// dropOldestReplayLocked drops the oldest message of the away session that holds the most;
// false when no session holds any. The session counts it as dropped.
func (a *Agent) dropOldestReplayLocked() bool {
	var most *clientSession
	for _, s := range a.sessions {
		if len(s.buf) > 0 && (most == nil || s.bufBytes > most.bufBytes) {
			most = s
		}
	}
	if most == nil {
		return false
	}
	a.dropFirstLocked(most)
	return true
}

// dropFirstLocked drops the oldest message of s's replay buffer.
func (a *Agent) dropFirstLocked(s *clientSession) {
	size := messageSize(s.buf[0])
	s.bufBytes -= size
	a.mem.release(int64(size))
	s.buf[0] = nil
	s.buf = s.buf[1:]
	s.dropped++
}

// releaseReplayLocked empties s's replay buffer.
func (a *Agent) releaseReplayLocked(s *clientSession) {
	a.mem.release(int64(s.bufBytes))
	s.buf, s.bufBytes = nil, 0
}
