package localnode

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCrashBackOff_RestartsAtOnceThenDoublesUpToTheCapAndResetsAfterALongRun(t *testing.T) {
	b := crashBackOff{base: 10 * time.Second, max: 5 * time.Minute}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	var waits []time.Duration
	// A container that crashes one second after each start.
	for range 8 {
		finished := now.Add(time.Second)
		at, wait := b.restartAt(finished)
		waits = append(waits, wait)
		if !at.Equal(finished.Add(wait)) {
			t.Fatalf("restart at %v, want %v", at, finished.Add(wait))
		}
		b.restarted(finished, at)
		now = at
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}

	// Running for longer than twice the cap forgets the crash loop.
	finished := now.Add(11 * time.Minute)
	if _, wait := b.restartAt(finished); wait != 0 {
		t.Errorf("wait after a long run = %v, want 0", wait)
	}
	b.restarted(finished, finished)
	if _, wait := b.restartAt(finished.Add(time.Second)); wait != 10*time.Second {
		t.Errorf("wait after the next crash = %v, want 10s", wait)
	}
}
