package node_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport/mem"
)

// syncCfg is a small cluster's timing, generous enough for -race on a
// loaded machine.
var syncCfg = node.Config{
	HeartbeatPeriod: 20 * time.Millisecond,
	SuspectTimeout:  500 * time.Millisecond,
	StartGrace:      time.Second,
}

// TestThreeAdjacentFailuresReachEverySurvivor is the benchmark's finding:
// at N = 8, ranks 1, 2 and 3 crash at once (three failures, above Theorem
// 1's ⌊log2 8⌋−1 = 2). Rank 4 detects 3 first and broadcasts it with
// D = {3}: over HBA's A = {0,1,2,4,5,6,7} rank 0's only neighbours in the
// second hypercube are 1 and 2, both dead, so the broadcast misses rank 0.
// The later broadcasts of 2 and 1 carry D ⊇ {3}; the digest check (sync.go)
// makes rank 0 fetch 3's record from their source. Every survivor must end
// with D = {1, 2, 3}, with the crash reported as a crash by its observer.
func TestThreeAdjacentFailuresReachEverySurvivor(t *testing.T) {
	seeds := 3
	if testing.Short() {
		seeds = 1
	}
	for _, overlay := range []string{"hba", "bmg"} {
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", overlay, seed), func(t *testing.T) {
				cfg := syncCfg
				cfg.Broadcast = overlay
				c := startCluster(t, 8, cfg, mem.WithDelay(2*time.Millisecond, seed))
				time.Sleep(300 * time.Millisecond) // the ring settles
				for _, r := range []ranks.Rank{1, 2, 3} {
					c.killed[r] = true
					c.net.Kill(r) // all three silent at once…
				}
				for _, r := range []ranks.Rank{1, 2, 3} {
					c.nodes[r].Close() // …then their threads stop
				}
				c.waitComplete(30 * time.Second)
				c.waitRing(10 * time.Second)
				for i, nd := range c.nodes {
					if c.killed[ranks.Rank(i)] {
						continue
					}
					if d := nd.Dead(); !slices.Equal(d, []ranks.Rank{1, 2, 3}) {
						t.Fatalf("rank %d: D = %v, want [1 2 3]", i, d)
					}
					for _, r := range []ranks.Rank{1, 2, 3} {
						ev, _ := nd.Known(r)
						if ev.Left || ev.Detector != 4 {
							t.Fatalf("rank %d: %d reported as %+v, want a crash detected by 4", i, r, ev)
						}
					}
				}
			})
		}
	}
}
