package detector_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/ranks"
)

// TestPartitionHealsByEvictingTheMinority: ranks 5–7 of 8 are cut off for
// 10δ, and each side declares the other dead. Once the link is back, the
// minority's split probes reach the majority, which tells them they are
// evicted: the cut-off ranks stop, the majority is never evicted and knows
// exactly the cut-off ranks gone.
func TestPartitionHealsByEvictingTheMinority(t *testing.T) {
	const n = 8
	c := newCluster(t, n, nil)
	c.run(3 * delta)
	minority := []ranks.Rank{5, 6, 7}
	c.partition(minority...)
	c.run(10 * delta)
	for _, r := range minority {
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

// TestNoSplitProbesInAHealthyJob: ranks holding at most half of the job
// dead never probe, even after crashes.
func TestNoSplitProbesInAHealthyJob(t *testing.T) {
	c := newCluster(t, 8, func(*detector.Config) {})
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
