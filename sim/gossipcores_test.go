package sim

import (
	"math"
	"testing"

	"github.com/vigil-hpc/vigil/bcast"
)

// TestCoreGossipMatchesSimTree: the corrected tree is deterministic, so the
// runtime's cores (RunCoreGossip) and the fast model (GossipSim) must send
// exactly the same number of messages and deliver last at the same step,
// for each correction, n and ℓ, without failures. One convention differs:
// an FCG g-node delivers when it is done, which it finds in the step after
// its last send; GossipSim dates it at that last send (seed 002's
// latency), so the cores' FCG deliveries come one step later.
func TestCoreGossipMatchesSimTree(t *testing.T) {
	for _, alg := range []GossipAlg{OCG, CCG, FCG} {
		for _, n := range []int{16, 64, 256, 1000} {
			for ell := range 3 {
				cfg := bcast.GossipConfig{Alg: alg, Tree: true, Step: 1000, Latency: int64(1000 * ell), C: 4, F: 1}
				core, err := RunCoreGossip(CoreGossipRun{Cfg: cfg, N: n})
				if err != nil {
					t.Fatal(err)
				}
				tr := GreedyTree(n, ell, nil)
				g := gsim(t, GossipConfig{Alg: alg, N: n, T: TreeSpan(tr, ell), C: 4, F: 1, Ell: ell, Tree: tr})
				want := g.Run(alive(n), newRand(1, streamGossip))
				if alg == FCG {
					want.LastDelivery++
				}
				if int64(core.Msgs) != want.Msgs || core.LastDelivery != want.LastDelivery || core.Reached != int(want.Reached) {
					t.Errorf("%v tree n=%d ℓ=%d: cores sent %d, last delivery %d, reached %d; GossipSim %d, %d, %d",
						alg, n, ell, core.Msgs, core.LastDelivery, core.Reached, want.Msgs, want.LastDelivery, want.Reached)
				}
			}
		}
	}
}

// TestCoreGossipMatchesSimRandom: with random gossip the two draw targets
// differently, so their means over many runs must agree: messages and
// last delivery within 3% (FCG's one-step convention aside, see
// TestCoreGossipMatchesSimTree), every participant reached in both.
func TestCoreGossipMatchesSimRandom(t *testing.T) {
	const n, runs, ell = 256, 150, 2
	for _, alg := range []GossipAlg{OCG, CCG, FCG} {
		cfg := bcast.GossipConfig{Alg: alg, Step: 1000, Latency: 1000 * ell, F: 1}
		gp, _ := bcast.NewGossip(0, n, cfg)
		T, C, _ := gp.Plan(n)
		g := gsim(t, GossipConfig{Alg: alg, N: n, T: T, C: C, F: 1, Ell: ell})
		var cm, cl, sm, sl float64
		for i := range runs {
			core, err := RunCoreGossip(CoreGossipRun{Cfg: cfg, N: n, Seed: uint64(i)})
			if err != nil {
				t.Fatal(err)
			}
			s := g.Run(alive(n), newRand(uint64(i), streamGossip))
			if core.Reached != core.Alive || !s.Consistent() {
				t.Fatalf("%v run %d: cores reached %d of %d, GossipSim %d of %d", alg, i, core.Reached, core.Alive, s.Reached, s.Alive)
			}
			cm += float64(core.Msgs)
			cl += float64(core.LastDelivery)
			sm += float64(s.Msgs)
			sl += float64(s.LastDelivery)
			if alg == FCG {
				sl++
			}
		}
		t.Logf("%v n=%d T=%d C=%d: mean messages cores %.1f GossipSim %.1f; mean last delivery %.2f vs %.2f steps",
			alg, n, T, C, cm/runs, sm/runs, cl/runs, sl/runs)
		if math.Abs(cm-sm) > 0.03*sm || math.Abs(cl-sl) > 0.03*sl {
			t.Errorf("%v: cores and GossipSim disagree beyond 3%%", alg)
		}
	}
}
