package detector_test

import (
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/ranks"
)

// continueMode asks for the behaviour these tests cover: a rank holding
// most of the job dead goes on (detector.PartitionContinue).
func continueMode(c *detector.Config) { c.Partition = detector.PartitionContinue }

// TestPartitionHealsByEvictingTheMinority, under PartitionContinue: ranks
// 5–7 of 8 are cut off for 10δ, and each side declares the other dead. Once the link is back, the
// minority's split probes reach the majority, which tells them they are
// evicted: the cut-off ranks stop, the majority is never evicted and knows
// exactly the cut-off ranks gone.
func TestPartitionHealsByEvictingTheMinority(t *testing.T) {
	const n = 8
	c := newCluster(t, n, continueMode)
	c.run(3 * delta)
	minority := []ranks.Rank{5, 6, 7}
	c.partition(minority...)
	c.run(10 * delta)
	for _, r := range minority {
		if c.evicted[r] {
			t.Fatalf("cut-off rank %d stopped during the cut under PartitionContinue", r)
		}
		if got := len(c.gone(r)); got != n-len(minority) {
			t.Fatalf("cut-off rank %d knows %v gone, want the 5 others", r, c.gone(r))
		}
	}
	c.heal()
	c.run(6 * delta)
	for _, r := range minority {
		if !c.evicted[r] {
			t.Errorf("cut-off rank %d not evicted after the heal", r)
		}
	}
	for r := range n - len(minority) {
		if c.evicted[r] {
			t.Fatalf("majority rank %d was evicted", r)
		}
	}
	c.wantGone(minority...)
	var probes uint64
	for r := range n - len(minority) {
		probes += c.cores[r].Stats().SplitProbes
	}
	if probes != 0 {
		t.Errorf("the majority sent %d split probes; it holds less than half the job dead", probes)
	}
}

// TestNoSplitProbesInAHealthyJob, under PartitionContinue: ranks holding
// at most half of the job dead never probe, even after crashes.
func TestNoSplitProbesInAHealthyJob(t *testing.T) {
	c := newCluster(t, 8, continueMode)
	c.run(3 * delta)
	c.crash(1, 2, 3)
	c.run(20 * delta)
	c.wantGone(1, 2, 3)
	for r, core := range c.cores {
		if p := core.Stats().SplitProbes; p != 0 {
			t.Errorf("rank %d sent %d split probes", r, p)
		}
	}
}

// TestPartitionAfterHeavyLosses, under PartitionContinue: the job first loses 6 of 16 ranks, then
// ranks 12–15 are cut off and healed. Both sides now hold more than half
// of the job dead and probe each other; the larger view wins (6 live ranks
// against 4): the cut-off ranks are evicted, the others never.
func TestPartitionAfterHeavyLosses(t *testing.T) {
	const n = 16
	c := newCluster(t, n, continueMode)
	c.run(3 * delta)
	crashed := []ranks.Rank{1, 2, 3, 6, 7, 8}
	c.crash(crashed...)
	c.run(20 * delta)
	c.wantGone(crashed...)
	minority := []ranks.Rank{12, 13, 14, 15}
	c.partition(minority...)
	c.run(10 * delta)
	c.heal()
	c.run(10 * delta)
	for _, r := range minority {
		if !c.evicted[r] {
			t.Errorf("cut-off rank %d not evicted after the heal", r)
		}
	}
	for r := range n {
		if !slices.Contains(minority, ranks.Rank(r)) && !slices.Contains(crashed, ranks.Rank(r)) && c.evicted[r] {
			t.Fatalf("rank %d of the larger side was evicted", r)
		}
	}
	c.wantGone(append(slices.Clone(crashed), minority...)...)
}
