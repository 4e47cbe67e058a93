package bench

import (
	"context"
	"fmt"
	"time"
)

// AttributionRow is the scheduler's account of a stand-alone detector
// beside a compute-only load that keeps every CPU busy.
type AttributionRow struct {
	H        time.Duration
	RealTime bool
	Duration time.Duration
	// EmitterHow says how the emitter thread was identified.
	EmitterHow string
	Attribution
	AgentReport
}

// Attribute runs ranks agents at h beside one burner per CPU for d, and
// measures with WatchSched: application = the burners, detector = the
// agents' threads, emitter = agent 0's heartbeat thread. δ is max(10h,
// 1 s): this measures cost and scheduling delay, and an agent declared
// dead (and exiting) halfway would cut the window short; the accuracy
// sweep is where δ = 10h is judged.
func Attribute(ctx context.Context, vigilBin string, ranks int, h time.Duration, rt bool, d time.Duration) (AttributionRow, error) {
	row := AttributionRow{H: h, RealTime: rt, Duration: d}
	agents, err := StartAgents(vigilBin, ranks, DetectorSpec{H: h, Delta: max(10*h, time.Second), Grace: accuracyGrace, RealTime: rt}, nil)
	if err != nil {
		return row, err
	}
	defer func() {
		if agents != nil {
			agents.Stop()
		}
	}()
	pids := agents.Pids()
	// With rt, wait (up to 2 s) until the emitter runs under SCHED_FIFO,
	// which identifies it for sure; else let it settle for 200 ms.
	var tid int
	var how string
	for deadline := time.Now().Add(2 * time.Second); ; {
		time.Sleep(20 * time.Millisecond)
		if tid, how, err = EmitterThread(pids[0]); err != nil {
			return row, err
		}
		if how == "SCHED_FIFO thread" || (!rt && time.Until(deadline) < 1800*time.Millisecond) || time.Now().After(deadline) {
			break
		}
	}
	row.EmitterHow = how
	burn, err := StartBurners(0)
	if err != nil {
		return row, err
	}
	w, err := WatchSched(burn.Pids(), pids, [2]int{pids[0], tid})
	if err != nil {
		burn.Stop()
		return row, fmt.Errorf("bench: watching the scheduler: %w", err)
	}
	sleepCtx(ctx, d)
	row.Attribution = w.Stop()
	burn.Stop()
	row.AgentReport = agents.Stop()
	agents = nil
	return row, ctx.Err()
}
