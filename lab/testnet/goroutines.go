package testnet

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// NoLeaks notes the goroutines running now and returns a check, to call
// once everything the test started is closed: it fails t, naming each
// leaked goroutine with its stack, if a goroutine started since is still
// running after timeout (go.uber.org/goleak, which identifies goroutines
// rather than counting them).
func NoLeaks(t testing.TB, timeout time.Duration) func() {
	ignore := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			err := goleak.Find(ignore) // retries for a short while itself
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after %v: %v", timeout, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
