package bench

import (
	"math"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	if s.N != 8 || s.Min != 2 || s.Max != 9 || s.Mean != 5 {
		t.Fatalf("Summarize = %+v", s)
	}
	if want := math.Sqrt(32.0 / 7); math.Abs(s.Std-want) > 1e-12 {
		t.Errorf("Std = %v, want %v", s.Std, want)
	}
	if (Summarize(nil) != Summary{}) || Summarize([]float64{3}).Std != 0 {
		t.Error("degenerate samples")
	}
}

func TestAcrossRanks(t *testing.T) {
	rt := AcrossRanks([]time.Duration{3, 1, 8})
	if rt.TMin != 1 || rt.TMax != 8 || rt.TAvg != 4 {
		t.Errorf("AcrossRanks = %+v", rt)
	}
	if (AcrossRanks(nil) != RankTimes{}) {
		t.Error("empty")
	}
}

func TestOverheadAndBand(t *testing.T) {
	if o := Overhead(10, 11); math.Abs(o-0.1) > 1e-12 {
		t.Errorf("Overhead(10, 11) = %v", o)
	}
	if !math.IsNaN(Overhead(0, 1)) {
		t.Error("Overhead with off = 0 must be NaN")
	}
	b := VariabilityBand([]float64{9, 10, 11})
	if b.Mean != 10 || b.Std != 1 || math.Abs(b.Rel-0.1) > 1e-12 {
		t.Errorf("band = %+v", b)
	}
	if b.Significant(0.05) || !b.Significant(-0.2) {
		t.Error("Significant")
	}
}

func TestQuantileAndCDF(t *testing.T) {
	xs := []float64{4, 1, 3, 2}
	if q := Quantile(xs, 0.5); q != 2.5 {
		t.Errorf("median = %v", q)
	}
	if Quantile(xs, 0) != 1 || Quantile(xs, 1) != 4 || !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("quantile edges")
	}
	if xs[0] != 4 {
		t.Error("Quantile modified its input")
	}
	x, p := CDF(xs)
	if x[0] != 1 || x[3] != 4 || p[0] != 0.25 || p[3] != 1 {
		t.Errorf("CDF = %v %v", x, p)
	}
}

func TestLog2Hist(t *testing.T) {
	for v, want := range map[uint64]int{0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 1023: 9, 1024: 10, math.MaxUint64: 63} {
		if got := Log2Bucket(v); got != want {
			t.Errorf("Log2Bucket(%d) = %d, want %d", v, got, want)
		}
	}
	var h Log2Hist
	for i := 0; i < 99; i++ {
		h.Add(10) // bucket 3
	}
	h.Add(5000) // bucket 12
	if h.Total() != 100 || h.Quantile(0.5) != 16 || h.Quantile(1) != 8192 {
		t.Errorf("hist total %d, median ≤ %d, max ≤ %d", h.Total(), h.Quantile(0.5), h.Quantile(1))
	}
	var e Log2Hist
	if e.Quantile(0.5) != 0 {
		t.Error("empty histogram quantile")
	}
}
