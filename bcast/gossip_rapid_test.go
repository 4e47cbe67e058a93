package bcast_test

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/sim"
)

// TestGossipGuaranteesRapid states the corrected gossips' guarantees as
// properties over generated jobs (rapid shrinks a counterexample to a
// smallest one): for any size, source, ranks dead before the broadcast,
// latency, jitter and crashes during the dissemination, every live
// participant delivers exactly once under CCG, FCG and the corrected
// tree, and under FCG and the corrected tree also with up to F further
// crashes during the correction.
func TestGossipGuaranteesRapid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 300).Draw(rt, "n")
		cfg := rapid.SampledFrom([]bcast.GossipConfig{
			{Alg: bcast.CCG}, {Alg: bcast.FCG, F: 1}, {Alg: bcast.FCG, F: 2},
			{Alg: bcast.FCG, F: 1, Tree: true}, {Alg: bcast.CCG, Tree: true},
		}).Draw(rt, "alg")
		cfg.Step = 1000
		cfg.Latency = int64(1000 * rapid.IntRange(0, 3).Draw(rt, "ell"))
		r := sim.CoreGossipRun{Cfg: cfg, N: n, Seed: rapid.Uint64().Draw(rt, "seed"),
			Jitter: rapid.IntRange(0, 2).Draw(rt, "jitter")}
		r.Source = ranks.Rank(rapid.IntRange(0, n-1).Draw(rt, "source"))
		for _, x := range rapid.SliceOfN(rapid.IntRange(0, n-1), 0, n/4).Draw(rt, "dead before") {
			if ranks.Rank(x) != r.Source {
				r.D.Add(ranks.Rank(x))
			}
		}
		r.Death = make([]int32, n)
		for i := range r.Death {
			r.Death[i] = math.MaxInt32
		}
		g, err := bcast.NewGossip(0, n, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		T, _, ell := g.Plan(n)
		start := T + ell + 1
		pick := func(label string) int { // a participant other than the source
			x := rapid.IntRange(0, n-1).Draw(rt, label)
			if ranks.Rank(x) == r.Source || r.D.Has(ranks.Rank(x)) {
				return -1
			}
			return x
		}
		for range rapid.IntRange(0, n/8).Draw(rt, "crashes in dissemination") {
			if x := pick("crashed"); x >= 0 {
				r.Death[x] = int32(rapid.IntRange(1, start).Draw(rt, "at"))
			}
		}
		if cfg.Alg == bcast.FCG {
			for range rapid.IntRange(0, cfg.F).Draw(rt, "crashes in correction") {
				if x := pick("crashed late"); x >= 0 && r.Death[x] == math.MaxInt32 {
					r.Death[x] = int32(start + rapid.IntRange(0, 3*n).Draw(rt, "late at"))
				}
			}
		}
		res, err := sim.RunCoreGossip(r)
		if err != nil {
			rt.Fatal(err)
		}
		for x, d := range res.Deliveries {
			if d > 1 || (d > 0 && r.D.Has(ranks.Rank(x))) {
				rt.Fatalf("rank %d delivered %d times (dead before: %v)", x, d, r.D.Has(ranks.Rank(x)))
			}
		}
		if res.Reached != res.Alive || res.Pending != 0 {
			rt.Fatalf("%d of %d live participants delivered, %d broadcasts still held", res.Reached, res.Alive, res.Pending)
		}
	})
}
