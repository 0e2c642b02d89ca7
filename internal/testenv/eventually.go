package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond until it returns nil, failing the test with cond's last error when
// timeout passes first.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
