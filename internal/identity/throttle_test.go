package identity_test

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nbkube/nbkube/internal/identity"
)

func TestThrottle_DelayDoublesWithFailuresAndSuccessResetsTheName(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	th := identity.NewThrottle(identity.ThrottleOptions{Free: 3, Delay: time.Second, MaxDelay: 8 * time.Second,
		Forget: time.Hour, Size: 100, Clock: clk})
	fail := func(keys ...string) {
		t.Helper()
		if wait := th.Begin(keys...); wait != 0 {
			t.Fatalf("Begin(%v) waits %v, want 0", keys, wait)
		}
		th.End(true, keys)
	}
	for range 2 {
		fail("ann", "10.0.0.1")
	}
	if wait := th.Begin("ann", "10.0.0.1"); wait != 0 {
		t.Fatalf("the third attempt waits %v; the first three are free", wait)
	}
	th.End(true, []string{"ann", "10.0.0.1"})
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second} {
		if wait := th.Begin("ann", "10.0.0.2"); wait != want {
			t.Fatalf("after a failure: wait %v, want %v", wait, want)
		}
		// Another address has no failures of its own, but the name has.
		clk.SetTime(clk.Now().Add(want - time.Millisecond))
		if wait := th.Begin("ann", "10.0.0.2"); wait != time.Millisecond {
			t.Fatalf("just before the delay ends: wait %v", wait)
		}
		clk.SetTime(clk.Now().Add(time.Millisecond))
		fail("ann", "10.0.0.2")
	}

	// A success clears the name, not the address.
	clk.SetTime(clk.Now().Add(8 * time.Second))
	if wait := th.Begin("ann", "10.0.0.1"); wait != 0 {
		t.Fatalf("after the delay: %v", wait)
	}
	th.End(false, []string{"ann", "10.0.0.1"}, "ann")
	fail("ann", "10.0.0.3")
	fail("ann", "10.0.0.3")
	if wait := th.Begin("ann", "10.0.0.3"); wait != 0 {
		t.Errorf("after a success the name waits %v", wait)
	}
	th.End(false, []string{"ann", "10.0.0.3"}, "ann")
	// The address kept its three failures: its next one brings the second delay.
	fail("bob", "10.0.0.1")
	if wait := th.Begin("carl", "10.0.0.1"); wait != 2*time.Second {
		t.Errorf("the address's fourth failure: wait %v, want 2s", wait)
	}
}

func TestThrottle_ConcurrentGuessesBeyondTheFreeOnesGoOneAtATime(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	th := identity.NewThrottle(identity.ThrottleOptions{Free: 3, Delay: time.Second, MaxDelay: time.Minute,
		Forget: time.Hour, Size: 100, Clock: clk})
	// A burst of ten at once: only the free three are checked.
	let := 0
	for range 10 {
		if th.Begin("ann") == 0 {
			let++
		}
	}
	if let != 3 {
		t.Fatalf("%d of a burst of 10 went on, want the 3 free", let)
	}
	for range 3 {
		th.End(true, []string{"ann"})
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if th.Begin("ann") != 0 {
		t.Fatal("after the delay the next attempt waits")
	}
	if wait := th.Begin("ann"); wait == 0 {
		t.Error("a second attempt went on while the first beyond the free ones was checked")
	}
}

func TestThrottle_ForgivesATrickleAndForgetsAfterQuiet(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	th := identity.NewThrottle(identity.ThrottleOptions{Free: 3, Delay: time.Second, MaxDelay: time.Minute,
		Forgive: time.Minute, Forget: 15 * time.Minute, Size: 100, Clock: clk})
	// A mistake a minute, for an hour, from one address: never a delay.
	for i := range 60 {
		if wait := th.Begin("10.0.0.1"); wait != 0 {
			t.Fatalf("failure %d a minute apart waits %v", i, wait)
		}
		th.End(true, []string{"10.0.0.1"})
		clk.SetTime(clk.Now().Add(time.Minute))
	}

	never := identity.NewThrottle(identity.ThrottleOptions{Free: 3, Delay: time.Second, MaxDelay: time.Minute,
		Forget: 15 * time.Minute, Size: 100, Clock: clk})
	for range 3 {
		never.Begin("ann")
		never.End(true, []string{"ann"})
	}
	clk.SetTime(clk.Now().Add(10 * time.Minute))
	if wait := never.Begin("ann"); wait != 0 {
		t.Fatalf("after the delay: %v", wait)
	}
	never.End(true, []string{"ann"})
	if wait := never.Begin("ann"); wait != 2*time.Second {
		t.Fatalf("without Forgive, failures add up until Forget: wait %v, want 2s", wait)
	}
	clk.SetTime(clk.Now().Add(16 * time.Minute))
	if wait := never.Begin("ann"); wait != 0 {
		t.Errorf("after Forget of quiet: wait %v", wait)
	}
}

func TestThrottle_RemembersAtMostSizeKeys(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	th := identity.NewThrottle(identity.ThrottleOptions{Free: 3, Delay: time.Second, MaxDelay: time.Minute,
		Forget: time.Hour, Size: 50, Clock: clk})
	for i := range 10000 {
		k := fmt.Sprintf("guess-%d", i)
		th.Begin(k)
		th.End(true, []string{k})
	}
	if n := identity.ThrottleKeys(th); n > 50 {
		t.Errorf("%d keys remembered, bound 50", n)
	}
}
