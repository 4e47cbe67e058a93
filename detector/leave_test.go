package detector_test

import (
	"math/rand/v2"
	"testing"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/ranks"
)

// Ranks departing together — a whole job stopping, or most of it, each
// rank's LEAVE reaching an observer that is departing too — are all
// announced as departures: no rank that stays, and no rank still lingering,
// is told of a crash, and every rank that stays learns every departure.
func TestJobWideLeave(t *testing.T) {
	modes := []struct {
		name  string
		tweak func(*detector.Config)
	}{
		{"algorithm 1", nil},
		{"block mending, early probes", func(c *detector.Config) { c.Probe, c.ProbeAfter = 8, delta/2 }},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			for seed := range uint64(60) {
				rng := rand.New(rand.NewPCG(seed, 7))
				n := 3 + rng.IntN(30)
				stay := rng.IntN(min(n, 4)) // 0: the whole job leaves
				perm := rng.Perm(n)
				leavers := perm[stay:]
				window := []int64{0, h, delta, 3 * delta}[rng.IntN(4)]
				linger := []int64{h, 2 * h, delta}[rng.IntN(3)]
				jobWideLeave(t, seed, n, leavers, window, linger, mode.tweak)
			}
		})
	}
}

// jobWideLeave makes every rank of leavers leave at a random time within
// window, linger (still running, its heartbeats stopped) and then exit,
// and checks what everyone was told.
func jobWideLeave(t *testing.T, seed uint64, n int, leavers []int, window, linger int64, tweak func(*detector.Config)) {
	t.Helper()
	c := newCluster(t, n, tweak)
	c.run(3 * delta)
	rng := rand.New(rand.NewPCG(seed, 11))
	at := map[int]int64{}
	for _, r := range leavers {
		at[r] = c.now + rng.Int64N(window+1)
	}
	left := make([]bool, n)
	gone := map[ranks.Rank]bool{}
	for _, r := range leavers {
		gone[ranks.Rank(r)] = true
	}
	end := c.now + window + linger + 6*delta
	for c.now < end {
		for _, r := range leavers {
			switch {
			case !left[r] && c.now >= at[r]:
				left[r] = true
				if to, msg, ok := c.cores[r].Leave(); ok {
					c.queue = append(c.queue, envelope{ranks.Rank(r), to, msg})
				}
				c.beating[r] = false
			case left[r] && !c.crashed[r] && c.now >= at[r]+linger:
				c.crash(ranks.Rank(r))
			}
		}
		c.run(h)
		for _, r := range leavers {
			if left[r] {
				c.beating[r] = false // a departed rank's thread stays paused
			}
		}
	}
	for r := range n {
		for _, ev := range c.events[r] {
			if !ev.Left {
				t.Fatalf("seed %d, n = %d, leavers %v, window %d, linger %d: rank %d was told that rank %d crashed",
					seed, n, leavers, window, linger, r, ev.Rank)
			}
		}
		if c.evicted[r] {
			t.Fatalf("seed %d: rank %d evicted", seed, r)
		}
		if gone[ranks.Rank(r)] {
			continue
		}
		var know ranks.Set
		for _, ev := range c.events[r] {
			know.Add(ev.Rank)
		}
		for g := range gone {
			if !know.Has(g) {
				t.Fatalf("seed %d, n = %d, leavers %v: staying rank %d never learned that %d left (knows %v)",
					seed, n, leavers, r, g, know.Members())
			}
		}
	}
}
