package detector_test

import (
	"math/rand/v2"
	"testing"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/hb"
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
	var dead []ranks.Rank
	for i := range b {
		dead = append(dead, ranks.Rank((first+i)%n))
	}
	return crashKnown(t, n, dead, func(cfg *detector.Config) { cfg.Probe, cfg.ProbeAfter = probe, after })
}

// crashKnown kills the ranks of dead at once in a job of n ranks
// configured by tweak and returns the time from the crash until every
// survivor knew every dead rank, checking accuracy and completeness.
func crashKnown(t *testing.T, n int, dead []ranks.Rank, tweak func(*detector.Config)) int64 {
	t.Helper()
	c := newCluster(t, n, tweak)
	c.run(3 * delta)
	c.crash(dead...)
	crash := c.now
	bound := int64(2*len(dead)+4) * delta // Algorithm 1 walks a block one 2δ at a time
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

// Early probes at the second check in a row without a heartbeat
// (hb.EarlyProbeAfter, the node runtime's default; the harness checks
// every h): the same exhaustive blocks, known within δ + 2h (the probes
// go out at the second check after the last heartbeat and have δ to be
// answered), where ProbeAfter = δ/2 takes δ + 3h; never a live rank.
func TestEarlyProbingSecondCheckExhaustive(t *testing.T) {
	exhaustiveBlocks(t, hb.EarlyProbeAfter(delta, h), delta+2*h)
}

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
		c.beating[r] = false // silent for 3×h: past δ/2 = 2.5×h, before δ = 5×h
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

// hostsOf labels n ranks placed k per host: rank r on host r/k.
func hostsOf(n, k int) []uint32 {
	h := make([]uint32, n)
	for r := range h {
		h[r] = uint32(r / k)
	}
	return h
}

// hostRanks returns the ranks of hosts hs, k ranks per host.
func hostRanks(k int, hs ...int) []ranks.Rank {
	var out []ranks.Rank
	for _, x := range hs {
		for r := x * k; r < (x+1)*k; r++ {
			out = append(out, ranks.Rank(r))
		}
	}
	return out
}

// hostCrash is crashKnown with host labels of k ranks per host, window
// probe and early probes after after (0: none).
func hostCrash(t *testing.T, n, k, probe int, after int64, dead []ranks.Rank) int64 {
	t.Helper()
	hosts := hostsOf(n, k)
	return crashKnown(t, n, dead, func(cfg *detector.Config) { cfg.Probe, cfg.ProbeAfter, cfg.Hosts = probe, after, hosts })
}

// Whole hosts of 32 and 64 ranks at n = 128 and 256, window 8, every host
// in turn: known by every survivor within 2δ plus the check and message
// granularity (one round, however many ranks), 1.5δ with early probes;
// without labels the same crash takes R+1 rounds.
func TestHostMendingWholeHosts(t *testing.T) {
	const probe = 8
	for _, n := range []int{128, 256} {
		for _, k := range []int{32, 64} {
			for x := range n / k {
				dead := hostRanks(k, x)
				for _, after := range []int64{0, delta / 2} {
					bound := 2*delta + 2*h
					if after > 0 {
						bound = 3*delta/2 + 2*h
					}
					if got := hostCrash(t, n, k, probe, after, dead); got > bound {
						t.Fatalf("n=%d host %d of %d (early %v): known after %v ms, want ≤ %v ms", n, x, k, after, float64(got)/1e6, float64(bound)/1e6)
					}
				}
			}
			if n == 256 && k == 64 {
				labelled := hostCrash(t, n, k, probe, 0, hostRanks(k, 1))
				plain := blockCrash(t, n, k, k, probe)
				t.Logf("host of 64 in 256, W = 8: %.0f ms with host labels, %.0f ms without (δ = %d ms)", float64(labelled)/1e6, float64(plain)/1e6, delta/1e6)
				if labelled >= plain {
					t.Errorf("host labels %v not faster than %v without", labelled, plain)
				}
			}
		}
	}
}

// A host crash with one more rank of a neighbouring host: after it (the
// observer's emitter is the host after's first rank: one round) and before
// it (a second round for the extra rank, two hosts touched).
func TestHostMendingNeighbour(t *testing.T) {
	const n, k, probe = 128, 32, 8
	for _, c := range []struct {
		name  string
		dead  []ranks.Rank
		bound int64
	}{
		{"and the next rank", append(hostRanks(k, 1), 64), 2*delta + 2*h},
		{"and the previous rank", append([]ranks.Rank{31}, hostRanks(k, 1)...), 3*delta + 2*h},
	} {
		got := hostCrash(t, n, k, probe, 0, c.dead)
		t.Logf("host of 32 %s: %.0f ms", c.name, float64(got)/1e6)
		if got > c.bound {
			t.Errorf("host of 32 %s: known after %v ms, want ≤ %v ms", c.name, float64(got)/1e6, float64(c.bound)/1e6)
		}
	}
}

// Two hosts at once, apart (each one round) and adjacent (a round each,
// one after the other).
func TestHostMendingTwoHosts(t *testing.T) {
	const probe = 8
	for _, c := range []struct {
		name  string
		n, k  int
		hosts []int
		bound int64
	}{
		{"apart, 32", 128, 32, []int{0, 2}, 2*delta + 2*h},
		{"adjacent, 32", 128, 32, []int{1, 2}, 3*delta + 2*h},
		{"apart, 64", 256, 64, []int{1, 3}, 2*delta + 2*h},
		{"adjacent, 64 (wrapping)", 256, 64, []int{3, 0}, 3*delta + 2*h},
	} {
		got := hostCrash(t, c.n, c.k, probe, 0, hostRanks(c.k, c.hosts...))
		t.Logf("two hosts %s: %.0f ms", c.name, float64(got)/1e6)
		if got > c.bound {
			t.Errorf("two hosts %s: known after %v ms, want ≤ %v ms", c.name, float64(got)/1e6, float64(c.bound)/1e6)
		}
	}
}

// A host with one survivor, at every position of the host: the live rank
// answers its probe and is never reported, every other rank of the host is
// reported by all.
func TestHostMendingOneSurvivor(t *testing.T) {
	const n, k, probe = 128, 32, 8
	for _, after := range []int64{0, delta / 2} {
		for s := range k {
			var dead []ranks.Rank
			for _, r := range hostRanks(k, 2) {
				if r != ranks.Rank(2*k+s) {
					dead = append(dead, r)
				}
			}
			hostCrash(t, n, k, probe, after, dead) // wantGone: exactly dead, by every running rank
		}
	}
}

// Random hosts of random sizes at n = 4,096 with host labels: the crash of
// one host known within 2δ plus the granularity.
func TestHostMendingRandom(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: n = 4,096")
	}
	rng := rand.New(rand.NewPCG(4096, 2))
	for range 3 {
		const n = 4096
		k := 16 << rng.IntN(4) // 16 … 128 ranks per host
		x := rng.IntN(n / k)
		if got := hostCrash(t, n, k, 16, 0, hostRanks(k, x)); got > 2*delta+2*h {
			t.Fatalf("n=%d host %d of %d: known after %v ms", n, x, k, float64(got)/1e6)
		}
	}
}
