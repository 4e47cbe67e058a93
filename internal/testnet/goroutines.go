package testnet

import (
	"runtime"
	"testing"
	"time"
)

// WaitGoroutines fails t unless the number of goroutines falls back to
// before within timeout (a goroutine that closed its done channel in a
// defer may still be exiting when Close returns). On failure it prints
// every goroutine's stack.
func WaitGoroutines(t testing.TB, before int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines leaked: %d > %d after %v\n%s", runtime.NumGoroutine(), before, timeout,
				buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}
