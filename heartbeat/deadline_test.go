package heartbeat_test

import (
	"os"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// deadlineThreads counts this process's threads under SCHED_DEADLINE.
func deadlineThreads(t *testing.T) int {
	n := 0
	for _, p := range policies(t) {
		if p == 6 {
			n++
		}
	}
	return n
}

// TestEmitterDeadline: a real-time, unpinned C heartbeat thread with a
// reservation runs SCHED_DEADLINE (as root; without privilege it stays
// at normal priority and says so); pinned, it runs SCHED_FIFO instead,
// since the kernel refuses to pin a deadline thread. (The Go thread is
// never SCHED_DEADLINE: it may have to create a thread, which the kernel
// refuses a deadline thread.)
func TestEmitterDeadline(t *testing.T) {
	const h = int64(10 * time.Millisecond)
	reserve := heartbeat.DeadlineReserve(h) / 5 // a small share: other tests' threads may hold some
	if got := heartbeat.DeadlineReserve(int64(100 * time.Microsecond)); got != int64(50*time.Microsecond) {
		t.Fatalf("DeadlineReserve(100µs) = %d, want h/2", got)
	}
	for _, tc := range []struct {
		name   string
		native bool
		cpu    int
	}{{"native", true, -1}, {"native pinned", true, 0}} { // the Go thread: SCHED_FIFO, as before (realtime_test.go)
		t.Run(tc.name, func(t *testing.T) {
			slots := transport.NewSlots(4)
			cfg := heartbeat.EmitterConfig{Period: h, CPU: tc.cpu, RealTime: true, Priority: 1, Reserve: reserve,
				Send: func(ranks.Rank, uint64) error { return nil }}
			if tc.native {
				cfg.Sink = func(ranks.Rank) (heartbeat.Sink, bool) { return heartbeat.Sink{Word: slots.Word(0)}, true }
			}
			before := deadlineThreads(t)
			e, err := heartbeat.NewEmitter(cfg)
			if err != nil {
				t.Fatal(err)
			}
			e.SetObserver(1)
			if err := e.Start(); err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			waitUntil(t, "a heartbeat", func() bool { return e.Stats().Sent > 0 })
			st := e.Stats()
			if st.Native != tc.native {
				t.Fatalf("Native = %v", st.Native)
			}
			if os.Geteuid() != 0 {
				if st.Deadline || st.RealTime {
					t.Fatalf("without privilege: Deadline %v RealTime %v, want both refused", st.Deadline, st.RealTime)
				}
				return
			}
			wantDL := tc.cpu < 0 && tc.native
			if st.Deadline != wantDL || !st.RealTime {
				t.Fatalf("Deadline %v RealTime %v, want Deadline %v and RealTime", st.Deadline, st.RealTime, wantDL)
			}
			if got := deadlineThreads(t) - before; wantDL && got != 1 || !wantDL && got != 0 {
				t.Fatalf("%d more threads under SCHED_DEADLINE after the start, want %v", got, wantDL)
			}
		})
	}
}
