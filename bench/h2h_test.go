package bench

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestTrafficPerPeriod(t *testing.T) {
	ms := int64(time.Millisecond)
	before := map[int]ChildLine{0: {Mono: 0, Msgs: 10, Bytes: 100}, 1: {Mono: 0, Msgs: 0, Bytes: 0}}
	after := map[int]ChildLine{0: {Mono: 1000 * ms, Msgs: 20, Bytes: 600}, 1: {Mono: 500 * ms, Msgs: 5, Bytes: 50}, 2: {Mono: 9, Msgs: 1}}
	// rank 0: 10 msgs in 10 periods; rank 1: 5 in 5; rank 2 has no "before".
	m, b := trafficPerPeriod(before, after, 100*time.Millisecond)
	if math.Abs(m-2) > 1e-9 || math.Abs(b-60) > 1e-9 {
		t.Errorf("msgs %v bytes %v per period, want 2 and 60", m, b)
	}
}

// TestHeadToHeadHarness runs both systems at N = 4 with one victim per
// kill: every survivor must report every victim, and traffic must be
// counted. It checks the harness, not the systems' speed.
func TestHeadToHeadHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("builds vigil-bench and starts 16 child processes")
	}
	bin := buildBench(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rows, err := HeadToHead(ctx, H2HConfig{BenchBin: bin, Sizes: []int{4}, Period: 100 * time.Millisecond, DeltaFactor: 5,
		Window: 300 * time.Millisecond, Several: 1, Wait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].System != Vigil || rows[1].System != Memberlist {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		for i, k := range []Kill{r.One, r.Spread, r.Adjacent} {
			if !k.Complete || len(k.Victims) != 1 || k.First <= 0 || k.Stable < k.First || len(k.Latencies) == 0 {
				t.Errorf("%s kill %d: %+v", r.System, i, k)
			}
		}
		if r.MsgsPerPeriod <= 0 || r.BytesPerPeriod <= r.MsgsPerPeriod {
			t.Errorf("%s: traffic %v msgs %v bytes per period", r.System, r.MsgsPerPeriod, r.BytesPerPeriod)
		}
	}
}
