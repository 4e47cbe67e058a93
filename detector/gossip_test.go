package detector_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/ranks"
)

// TestGossipPropagatesCrashes: with each corrected gossip as the
// propagation, at n = 64 to 1,024, three ranks crash at once and a fourth
// while their broadcasts are being delivered: every surviving rank knows
// exactly the four, each once, and the broadcasts all finish.
func TestGossipPropagatesCrashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for _, g := range []bcast.GossipConfig{
		{Alg: bcast.OCG}, {Alg: bcast.CCG}, {Alg: bcast.FCG, F: 1}, {Alg: bcast.FCG, F: 1, Tree: true},
	} {
		g.Step, g.Latency = h/10, h/5 // ten steps per heartbeat period
		for _, n := range []int{64, 256, 1024} {
			if testing.Short() && n > 256 {
				continue
			}
			name := fmt.Sprintf("%v/tree=%v/n=%d", g.Alg, g.Tree, n)
			t.Run(name, func(t *testing.T) {
				c := newCluster(t, n, func(cfg *detector.Config) { gc := g; cfg.Gossip = &gc })
				c.run(2 * delta)
				perm := rng.Perm(n)
				var gone []ranks.Rank
				for _, r := range perm[:3] {
					gone = append(gone, ranks.Rank(r))
				}
				c.crash(gone...)
				// Until the first detections' broadcasts are under way.
				for i := 0; i < 100 && len(c.queue) == 0; i++ {
					c.run(h)
				}
				c.deliverSome(rng.IntN(len(c.queue) + 1))
				last := ranks.Rank(perm[3])
				c.crash(last)
				gone = append(gone, last)
				c.run(20 * delta)
				c.wantGone(gone...)
				for r, core := range c.cores {
					if c.running(ranks.Rank(r)) && core.Propagating() {
						t.Fatalf("rank %d: a broadcast still in progress after 20δ", r)
					}
				}
			})
		}
	}
}
