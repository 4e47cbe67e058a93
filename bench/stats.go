package bench

import (
	"math"
	"slices"
)

// Summary is the usual description of a sample.
type Summary struct {
	N                   int
	Min, Max, Mean, Std float64
}

// Summarize describes xs (the sample standard deviation, n−1; 0 for n < 2).
// An empty sample gives a zero Summary.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := Summary{N: len(xs), Min: xs[0], Max: xs[0]}
	var sum float64
	for _, x := range xs {
		s.Min, s.Max = min(s.Min, x), max(s.Max, x)
		sum += x
	}
	s.Mean = sum / float64(len(xs))
	if len(xs) > 1 {
		var ss float64
		for _, x := range xs {
			ss += (x - s.Mean) * (x - s.Mean)
		}
		s.Std = math.Sqrt(ss / float64(len(xs)-1))
	}
	return s
}

// Band is the natural variability of runs without the detector: mean ± σ
// of their relative deviation from their own mean is [−Rel, +Rel].
type Band struct {
	Mean, Std float64
	// Rel is Std/Mean: a relative overhead inside ±Rel is indistinguishable
	// from run-to-run variation.
	Rel float64
}

// VariabilityBand computes the band of the off runs' values.
func VariabilityBand(off []float64) Band {
	s := Summarize(off)
	b := Band{Mean: s.Mean, Std: s.Std}
	if s.Mean != 0 {
		b.Rel = s.Std / s.Mean
	}
	return b
}

// Overhead is seed 003's metric: (on − off) / off, here with off and on the
// means of the interleaved runs' maximum latencies. It is NaN when off is 0.
func Overhead(off, on float64) float64 {
	if off == 0 {
		return math.NaN()
	}
	return (on - off) / off
}

// Significant reports whether an overhead lies outside the band.
func (b Band) Significant(overhead float64) bool {
	return math.Abs(overhead) > b.Rel
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of xs by linear interpolation
// between order statistics; NaN for an empty sample. xs is not modified.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	q = min(max(q, 0), 1)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (pos-float64(lo))*(s[hi]-s[lo])
}

// CDF returns the sorted sample and, for each point, the fraction of the
// sample at or below it (an empirical distribution function).
func CDF(xs []float64) (x, p []float64) {
	x = slices.Clone(xs)
	slices.Sort(x)
	p = make([]float64, len(x))
	for i := range x {
		p[i] = float64(i+1) / float64(len(x))
	}
	return x, p
}

// Log2Hist is a histogram with power-of-two buckets: bucket k counts values
// v with 2^k ≤ v < 2^(k+1) (bucket 0 also holds 0 and 1).
type Log2Hist [64]uint64

// Add counts v.
func (h *Log2Hist) Add(v uint64) { h[Log2Bucket(v)]++ }

// Log2Bucket is the bucket of v: floor(log2 v), and 0 for v ≤ 1.
func Log2Bucket(v uint64) int {
	k := 0
	for v > 1 {
		v >>= 1
		k++
	}
	return k
}

// Total is the number of values counted.
func (h *Log2Hist) Total() uint64 {
	var t uint64
	for _, c := range h {
		t += c
	}
	return t
}

// Quantile returns an upper bound of the q-quantile: the upper edge
// 2^(k+1) of the bucket that holds it (0 for an empty histogram).
func (h *Log2Hist) Quantile(q float64) uint64 {
	t := h.Total()
	if t == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(t)))
	want = max(want, 1)
	var acc uint64
	for k, c := range h {
		acc += c
		if acc >= want {
			if k >= 63 {
				return math.MaxUint64
			}
			return 1 << (k + 1)
		}
	}
	return math.MaxUint64
}
