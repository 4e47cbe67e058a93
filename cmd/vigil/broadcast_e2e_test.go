package main

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/node"
)

// TestE2EBroadcasts runs `vigil agent` (as `vigil run -n 32` does) with
// each propagation of -broadcast, overlays and corrected gossips: 32
// agents, h = 20 ms, δ = 200 ms, two ranks killed with -9 a few
// milliseconds apart, so the second's broadcast overlaps the first's.
// Every survivor must report exactly the two, and nothing else.
func TestE2EBroadcasts(t *testing.T) {
	const n = 32
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	for _, b := range node.Broadcasts {
		t.Run(b, func(t *testing.T) {
			j := startJob(t, n, "-h", "20ms", "-delta", "200ms", "-grace", "1s", "-broadcast", b)
			time.Sleep(1500 * time.Millisecond)
			for len(j.killed) < 2 {
				if r := uint32(rng.IntN(n)); !j.killed[r] {
					t.Logf("kill -9 rank %d", r)
					j.kill(r)
					time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
				}
			}
			j.waitComplete(n, j.killed, 30*time.Second)
			time.Sleep(400 * time.Millisecond) // nothing more may come
			j.checkAccuracy(j.killed)
		})
	}
}
