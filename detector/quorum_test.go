package detector_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/ranks"
)

// rangeOf returns the ranks lo..hi.
func rangeOf(lo, hi int) []ranks.Rank {
	var out []ranks.Rank
	for r := lo; r <= hi; r++ {
		out = append(out, ranks.Rank(r))
	}
	return out
}

// runUntilStopped runs one period at a time until every rank of rs has
// stopped or limit has passed, and returns how long it took (limit+h if
// some rank of rs still runs).
func (c *cluster) runUntilStopped(rs []ranks.Rank, limit int64) int64 {
	t0 := c.now
	for c.now-t0 <= limit {
		if !slices.ContainsFunc(rs, func(r ranks.Rank) bool { return !c.evicted[r] }) {
			return c.now - t0
		}
		c.run(h)
	}
	return limit + h
}

// wantSides checks that every rank of stopped stopped by the quorum rule
// and no rank of going stopped at all.
func (c *cluster) wantSides(stopped, going []ranks.Rank) {
	c.t.Helper()
	for _, r := range stopped {
		if !c.evicted[r] || !c.cores[r].Minority() {
			c.t.Fatalf("rank %d: stopped %v, by the quorum rule %v; want stopped as a minority (knows %v gone)",
				r, c.evicted[r], c.cores[r].Minority(), c.gone(r))
		}
	}
	for _, r := range going {
		if c.evicted[r] {
			c.t.Fatalf("rank %d of the side that goes on stopped (minority %v, knows %v gone)", r, c.cores[r].Minority(), c.gone(r))
		}
	}
}

// TestMinorityStopsDuringPartition: ranks 5–7 of 8 are cut off. They stop
// by the quorum rule, within 3δ with block mending (12δ with Algorithm 1,
// which mends one rank of the other side per 2δ); the majority goes on and reports
// exactly them; when the link comes back nothing changes: no rank stops,
// nothing new is reported.
func TestMinorityStopsDuringPartition(t *testing.T) {
	for _, mode := range []struct {
		name  string
		tweak func(*detector.Config)
		limit int64 // Algorithm 1 mends one rank per 2δ
	}{
		{"algorithm 1", nil, 12 * delta},
		{"block mending, early probes", func(c *detector.Config) { c.Probe, c.ProbeAfter = 8, delta/2 }, 3 * delta},
	} {
		t.Run(mode.name, func(t *testing.T) {
			const n = 8
			c := newCluster(t, n, mode.tweak)
			c.run(3 * delta)
			majority, minority := rangeOf(0, 4), rangeOf(5, 7)
			c.partition(minority...)
			took := c.runUntilStopped(minority, mode.limit)
			c.wantSides(minority, majority)
			t.Logf("the minority stopped %.1fδ after the cut", float64(took)/float64(delta))
			c.run(6 * delta)
			c.wantGone(minority...)
			c.heal()
			events := 0
			for r := range c.cores {
				events += len(c.events[r])
			}
			c.run(10 * delta)
			c.wantSides(minority, majority)
			c.wantGone(minority...)
			after := 0
			for r := range c.cores {
				after += len(c.events[r])
			}
			if after != events {
				t.Fatalf("%d events after the heal", after-events)
			}
		})
	}
}

// TestTieGoesToTheLowestRank: a 4 | 4 split of 8 goes to the side holding
// rank 0, whichever side the cut is made from.
func TestTieGoesToTheLowestRank(t *testing.T) {
	for _, cut := range [][]ranks.Rank{rangeOf(4, 7), rangeOf(0, 3), {0, 2, 4, 6}} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			c := newCluster(t, 8, nil)
			c.run(3 * delta)
			c.partition(cut...)
			var stay, stop []ranks.Rank
			for r := range ranks.Rank(8) {
				if slices.Contains(cut, r) == slices.Contains(cut, 0) {
					stay = append(stay, r)
				} else {
					stop = append(stop, r)
				}
			}
			took := c.runUntilStopped(stop, 10*delta)
			c.wantSides(stop, stay)
			c.run(6 * delta)
			c.wantSides(stop, stay)
			c.wantGone(stop...)
			t.Logf("the side without rank 0 stopped %.1fδ after the cut", float64(took)/float64(delta))
			c.heal()
			c.run(10 * delta)
			c.wantSides(stop, stay)
			c.wantGone(stop...)
		})
	}
}

// TestAgreementMovesTheMembership: the job loses ranks, then splits. Without
// an agreement since the losses, the membership is the whole job and
// neither side holds more than half of it: both stop. After an agreement
// its survivors are the membership, and the larger side (or, even, the
// side holding the lowest survivor) goes on.
func TestAgreementMovesTheMembership(t *testing.T) {
	bit := func(r ranks.Rank) []byte { return []byte{1 << (r % 8)} }
	for _, tc := range []struct {
		name         string
		n            int
		crashed, cut []ranks.Rank
		agreed       bool
		stay         []ranks.Rank // the rest stop
	}{
		// 16 ranks, 6 lost, then 6 | 4.
		{"6 | 4 after 6 of 16 lost, not agreed", 16, []ranks.Rank{1, 2, 3, 6, 7, 8}, rangeOf(12, 15), false, nil},
		{"6 | 4 after 6 of 16 lost, agreed", 16, []ranks.Rank{1, 2, 3, 6, 7, 8}, rangeOf(12, 15), true,
			[]ranks.Rank{0, 4, 5, 9, 10, 11}},
		// 8 ranks, rank 0 lost, then 3 | 4: without the agreement rank 0
		// is the membership's lowest, dead, and 4 of 8 is not enough.
		{"3 | 4 after rank 0 lost, not agreed", 8, []ranks.Rank{0}, rangeOf(4, 7), false, nil},
		{"3 | 4 after rank 0 lost, agreed", 8, []ranks.Rank{0}, rangeOf(4, 7), true, rangeOf(4, 7)},
		// 9 ranks, rank 8 lost and agreed: 4 | 4 goes to rank 0's side.
		{"4 | 4 after rank 8 lost, agreed", 9, []ranks.Rank{8}, rangeOf(4, 7), true, rangeOf(0, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.n, nil)
			c.run(3 * delta)
			c.crash(tc.crashed...)
			c.run(20 * delta)
			c.wantGone(tc.crashed...)
			if tc.agreed {
				c.agree(detector.OpOR, bit)
				c.run(2 * delta)
				for r := range c.cores {
					if c.running(ranks.Rank(r)) && c.cores[r].Members() != tc.n-len(tc.crashed) {
						t.Fatalf("rank %d: membership of %d after the agreement, want %d", r, c.cores[r].Members(), tc.n-len(tc.crashed))
					}
				}
			}
			c.partition(tc.cut...)
			var stop []ranks.Rank
			for r := range ranks.Rank(tc.n) {
				if !slices.Contains(tc.crashed, r) && !slices.Contains(tc.stay, r) {
					stop = append(stop, r)
				}
			}
			c.runUntilStopped(stop, 10*delta)
			c.run(4 * delta)
			c.wantSides(stop, tc.stay)
			if len(tc.stay) > 0 {
				c.wantGone(append(slices.Clone(tc.crashed), stop...)...)
			}
		})
	}
}

// TestBurstOfMostRanks: 5 of 8 ranks crash at once. By default the three
// survivors stop, as a minority would (they cannot tell the crash from a
// partition); under PartitionContinue they go on and report the five.
func TestBurstOfMostRanks(t *testing.T) {
	crashed, survivors := []ranks.Rank{1, 2, 4, 5, 6}, []ranks.Rank{0, 3, 7}
	c := newCluster(t, 8, nil)
	c.run(3 * delta)
	c.crash(crashed...)
	c.runUntilStopped(survivors, 20*delta)
	c.wantSides(survivors, nil)

	c = newCluster(t, 8, continueMode)
	c.run(3 * delta)
	c.crash(crashed...)
	c.run(20 * delta)
	c.wantSides(nil, survivors)
	c.wantGone(crashed...)
	warned := 0
	for _, l := range c.logs {
		if l.Msg == "this rank holds most of the job's membership dead (minority partition, or most ranks lost); going on (partition mode continue)" {
			warned++
		}
	}
	if warned != len(survivors) {
		t.Fatalf("%d warnings, want one per survivor", warned)
	}
}

// TestDeparturesStayInTheMembership: ranks that depart cleanly stay in the
// membership, so the few that stay never stop, even when one of them then
// crashes (a job stopping rank by rank).
func TestDeparturesStayInTheMembership(t *testing.T) {
	c := newCluster(t, 8, nil)
	c.run(3 * delta)
	leavers := rangeOf(1, 5)
	for _, r := range leavers {
		to, msg, ok := c.cores[r].Leave()
		if !ok {
			t.Fatalf("rank %d: Leave refused", r)
		}
		c.queue = append(c.queue, envelope{r, to, msg})
		c.crash(r)
		c.run(2 * delta)
	}
	c.run(6 * delta)
	c.wantGone(leavers...)
	c.wantSides(nil, []ranks.Rank{0, 6, 7})
	for _, r := range []ranks.Rank{0, 6, 7} {
		if m := c.cores[r].Members(); m != 8 {
			t.Fatalf("rank %d: membership of %d, want 8", r, m)
		}
	}
	c.crash(7)
	c.run(6 * delta)
	c.wantSides(nil, []ranks.Rank{0, 6})
	c.wantGone(append(leavers, 7)...)
}

// TestParsePartitionMode: the flag values round-trip; others are refused.
func TestParsePartitionMode(t *testing.T) {
	for _, m := range []detector.PartitionMode{detector.PartitionFailStop, detector.PartitionContinue} {
		if got, err := detector.ParsePartitionMode(m.String()); err != nil || got != m {
			t.Fatalf("%v: %v, %v", m, got, err)
		}
	}
	if _, err := detector.ParsePartitionMode("split"); err == nil {
		t.Fatal("\"split\" accepted")
	}
}
