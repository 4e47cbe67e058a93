package detector_test

import (
	"math/rand/v2"
	"testing"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/ranks"
)

// blockCrash kills ranks first … first+b−1 (mod n) at once in a job of n
// ranks, with block mending of window probe (0: Algorithm 1), and returns
// the time from the crash until every survivor knew every dead rank.
// Accuracy (no live rank reported) and completeness are checked.
func blockCrash(t *testing.T, n, first, b, probe int) int64 {
	return blockCrashAfter(t, n, first, b, probe, 0)
}

// blockCrashAfter is blockCrash with early probes after a silence of after
// (detector.Config.ProbeAfter; 0: none).
func blockCrashAfter(t *testing.T, n, first, b, probe int, after int64) int64 {
	t.Helper()
	c := newCluster(t, n, func(cfg *detector.Config) { cfg.Probe, cfg.ProbeAfter = probe, after })
	c.run(3 * delta)
	var dead []ranks.Rank
	for i := range b {
		dead = append(dead, ranks.Rank((first+i)%n))
	}
	c.crash(dead...)
	crash := c.now
	bound := int64(2*b+4) * delta // Algorithm 1 walks the block one 2δ at a time
	for c.now-crash < bound {
		c.run(h)
		if c.allKnow(dead) {
			break
		}
	}
	c.wantGone(dead...)
	var last int64
	for r := range c.cores {
		for _, at := range c.learned[r] {
			last = max(last, at)
		}
	}
	return last - crash
}

// allKnow reports whether every running rank knows every rank of dead.
func (c *cluster) allKnow(dead []ranks.Rank) bool {
	for r := range c.cores {
		if !c.running(ranks.Rank(r)) {
			continue
		}
		for _, d := range dead {
			if _, ok := c.learned[r][d]; !ok {
				return false
			}
		}
	}
	return true
}

// Every block size 1 … n−1 at every position, n ≤ 16 (and a sample of
// positions at n = 64): no live rank reported, every dead rank known by
// all, within 2δ plus the check and message granularity when b ≤ the
// window, and in fewer rounds than Algorithm 1 beyond it.
func TestBlockMendingExhaustive(t *testing.T) { exhaustiveBlocks(t, 0, 2*delta+2*h) }

// Early probes (ProbeAfter = δ/2): the same exhaustive blocks, known within
// 1.5δ plus the granularity when b ≤ the window; never a live rank.
func TestEarlyProbingExhaustive(t *testing.T) { exhaustiveBlocks(t, delta/2, 3*delta/2+2*h) }

// exhaustiveBlocks crashes every block of every size at every position
// (sampled at n = 64) with window 8 and early probes after after (0: none),
// and wants blocks of at most 8 known by all within bound.
func exhaustiveBlocks(t *testing.T, after, bound int64) {
	const probe = 8
	for _, n := range []int{2, 3, 5, 8, 16, 64} {
		for b := 1; b < n; b++ {
			for first := 0; first < n; first++ {
				if n == 64 && first%9 != 0 {
					continue
				}
				got := blockCrashAfter(t, n, first, b, probe, after)
				if b <= probe && got > bound {
					t.Fatalf("n=%d block of %d at %d: known after %v ms, want ≤ %v ms", n, b, first, float64(got)/1e6, float64(bound)/1e6)
				}
			}
		}
	}
}

// An emitter whose heartbeats stop for longer than ProbeAfter but shorter
// than δ (a paused process) starts an early round that reports no one; the
// same with a run of such pauses, over every rank.
func TestEarlyProbingLateEmitter(t *testing.T) {
	const n = 8
	c := newCluster(t, n, func(cfg *detector.Config) { cfg.Probe, cfg.ProbeAfter = 4, delta/2 })
	c.run(3 * delta)
	for r := range ranks.Rank(n) {
		c.beating[r] = false // silent for 3h: past δ/2 = 2.5h, before δ = 5h
		c.run(3 * h)
		c.beating[r] = true
		c.run(2 * delta)
	}
	c.wantGone()
	probes := 0
	for _, l := range c.logs {
		if l.Msg == "detected" {
			t.Fatalf("a detection in a run without failure: %+v", l)
		}
	}
	for r := range c.cores {
		probes += int(c.cores[r].Ring().Round())
	}
	if probes != n {
		t.Errorf("%d probe rounds for %d late emitters, want one each", probes, n)
	}
}

// The block mending against Algorithm 1 side by side: a block of 8 in 16
// (one host of 8 ranks), 2 in 16, and 15 in 16.
func TestBlockMendingAgainstAlgorithm1(t *testing.T) {
	for _, b := range []int{1, 2, 8, 15} {
		old := blockCrash(t, 16, 4, b, 0)
		now := blockCrash(t, 16, 4, b, 8)
		early := blockCrashAfter(t, 16, 4, b, 8, delta/2)
		t.Logf("block of %2d in 16: Algorithm 1 %5.0f ms, block mending %4.0f ms, with early probes %4.0f ms (δ = %d ms)",
			b, float64(old)/1e6, float64(now)/1e6, float64(early)/1e6, delta/1e6)
		if b > 1 && now >= old {
			t.Errorf("block of %d: mending %v not faster than Algorithm 1 %v", b, now, old)
		}
		if b > 1 && b <= 8 && early >= now {
			t.Errorf("block of %d: early probes %v not faster than mending at the suspicion %v", b, early, now)
		}
	}
}

// Two blocks at once, and random blocks at n = 4,096.
func TestBlockMendingSeveralBlocks(t *testing.T) {
	c := newCluster(t, 32, func(cfg *detector.Config) { cfg.Probe = 8 })
	c.run(3 * delta)
	dead := []ranks.Rank{4, 5, 6, 7, 20, 21, 22, 23, 24, 25}
	c.crash(dead...)
	c.run(3 * delta)
	c.wantGone(dead...)

	if testing.Short() {
		t.Log("-short: the random blocks at n = 4,096 are not run")
		return
	}
	rng := rand.New(rand.NewPCG(4096, 1))
	for range 3 {
		const n = 4096
		first, b := rng.IntN(n), 1+rng.IntN(64)
		got := blockCrash(t, n, first, b, 64)
		if got > 2*delta+2*h {
			t.Fatalf("n=%d block of %d at %d: known after %v ms", n, b, first, float64(got)/1e6)
		}
	}
}
