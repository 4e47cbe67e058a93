package era

import (
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

// BenchmarkAgreement32 measures core steps (Start and Step calls) per
// second for failure-free agreements among 32 ranks, driven in FIFO order
// without encoding: the cost of the state machine alone.
func BenchmarkAgreement32(b *testing.B) {
	for _, tc := range []struct {
		name string
		tree Tree
	}{{"binary", Binary(32)}, {"star", Star(32)}, {"bin-bin", NewHierarchical(BinaryShape, BinaryShape, nodes(32, 8), All(32))}} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 32
			f := newFastNet(n, tc.tree, BitAND, nil)
			v := []byte{0xff, 0xff, 0xff, 0xff}
			decisions := 0
			f.decide = func(ranks.Rank, *Decision) { decisions++ }
			b.ReportAllocs()
			seq := uint64(0)
			for b.Loop() {
				for p := range n {
					f.start(ranks.Rank(p), ID{Seq: seq}, v)
				}
				for f.step() {
				}
				seq++
			}
			if decisions != n*int(seq) {
				b.Fatalf("%d decisions for %d agreements", decisions, seq)
			}
			b.ReportMetric(float64(f.steps)/b.Elapsed().Seconds(), "steps/s")
			b.ReportMetric(float64(f.steps)/float64(seq), "steps/agreement")
		})
	}
}

func nodes(n, ppn int) []int {
	out := make([]int, n)
	for r := range out {
		out[r] = r / ppn
	}
	return out
}

// BenchmarkHarnessAgreement32 runs failure-free 32-rank agreements in the
// test harness (random delivery order, every message encoded and decoded)
// and reports core steps per second.
func BenchmarkHarnessAgreement32(b *testing.B) {
	cfg := simConfig{name: "bench", n: 32, base: Binary(32), agreements: 1, maxLatency: 4, maxDetect: 10}
	steps := 0
	for i := 0; b.Loop(); i++ {
		s := newSim(b, cfg, uint64(i))
		s.run()
		steps += s.events
	}
	b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
}
