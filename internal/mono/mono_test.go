package mono

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestNowIsClockMonotonic: Now agrees with clock_gettime(CLOCK_MONOTONIC).
func TestNowIsClockMonotonic(t *testing.T) {
	for i := 0; i < 10; i++ {
		var ts unix.Timespec
		a := Now()
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			t.Fatal(err)
		}
		b := Now()
		if s := ts.Nano(); s < a || s > b {
			t.Fatalf("CLOCK_MONOTONIC %d not within [%d, %d]", s, a, b)
		}
	}
}

func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		Now()
	}
}
