package bench

import (
	"math"
	"testing"
	"time"
)

func res(l Load, size int, tmaxUs float64) Result {
	return Result{Load: l, Size: size, RankTimes: RankTimes{TMax: time.Duration(tmaxUs * 1e3)}}
}

// TestOverheads checks the reduction of interleaved runs: the overhead of
// a group from its own off/on means, the band from every off run.
func TestOverheads(t *testing.T) {
	ms := time.Millisecond
	runs := []SweepRun{
		{H: ms, Placement: StandAlone, Results: []Result{res(PingPong, 0, 10)}},
		{H: ms, Placement: StandAlone, On: true, Suspicions: 1, Results: []Result{res(PingPong, 0, 12)}},
		{H: ms, Placement: StandAlone, Pair: 1, Results: []Result{res(PingPong, 0, 10)}},
		{H: ms, Placement: StandAlone, Pair: 1, On: true, Results: []Result{res(PingPong, 0, 12)}},
		{H: 10 * ms, Placement: StandAlone, Results: []Result{res(PingPong, 0, 8)}},
		{H: 10 * ms, Placement: StandAlone, On: true, Results: []Result{res(PingPong, 0, 8.1)}},
	}
	rows := Overheads(runs)
	if len(rows) != 2 {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	r := rows[0]
	if r.H != ms || r.Off != 10 || r.On != 12 || math.Abs(r.Overhead-0.2) > 1e-9 {
		t.Errorf("row 0: %+v", r)
	}
	// band over off runs {10, 10, 8}: mean 9.333, σ 1.155, rel 0.1237
	if math.Abs(r.Band.Rel-0.12372) > 1e-4 || !r.Significant || r.Suspicions != 1 {
		t.Errorf("row 0 band/significance: %+v", r)
	}
	if rows[1].Significant || math.Abs(rows[1].Overhead-0.0125) > 1e-9 {
		t.Errorf("row 1: %+v", rows[1])
	}
}
