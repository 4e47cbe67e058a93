package detector

import (
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/ranks"
)

// decided returns the Seqs of the decisions in rd.
func decided(rd Ready) []uint64 {
	var out []uint64
	for _, d := range rd.Decisions {
		out = append(out, d.ID.Seq)
	}
	return out
}

// TestHeldDecisions: a decision reached by at most half of the membership
// is held back; one that overtook the decision moving the membership
// first is delivered after it, in order; under PartitionContinue every
// decision is delivered at once.
func TestHeldDecisions(t *testing.T) {
	dec := func(seq uint64, dead ...ranks.Rank) Decision {
		return Decision{Decision: era.Decision{ID: era.ID{Seq: seq}, Dead: ranks.Of(dead...)}}
	}
	newCore := func(mode PartitionMode) *Core {
		c, err := NewCore(Config{Self: 9, Size: 10, SuspectTimeout: 5, Partition: mode})
		if err != nil {
			t.Fatal(err)
		}
		c.Start(0, 10)
		c.Ready()
		return c
	}
	c := newCore(PartitionFailStop)
	c.quorumDecided(dec(2, 0, 1, 2, 3, 4, 5)) // 4 of 10 decided: held
	if got := decided(c.Ready()); len(got) != 0 || c.Members() != 10 {
		t.Fatalf("decision of 4 of 10 delivered (%v), membership %d", got, c.Members())
	}
	c.quorumDecided(dec(1, 0, 1, 2, 3)) // 6 of 10: delivered, then 4 of 6
	if got := decided(c.Ready()); !slices.Equal(got, []uint64{1, 2}) || c.Members() != 4 {
		t.Fatalf("delivered %v, membership %d; want [1 2], 4", got, c.Members())
	}
	c = newCore(PartitionFailStop)
	c.quorumDecided(dec(1, 0, 1, 2, 3, 4)) // 5 of 10 without rank 0: held
	c.quorumDecided(dec(2, 5, 6, 7, 8))    // 6 of 10: delivered; the held one is then 1 of 6, still held
	if got := decided(c.Ready()); !slices.Equal(got, []uint64{2}) || c.Members() != 6 {
		t.Fatalf("delivered %v, membership %d; want [2], 6", got, c.Members())
	}
	c = newCore(PartitionContinue)
	c.quorumDecided(dec(2, 0, 1, 2, 3, 4, 5))
	c.quorumDecided(dec(1, 0, 1, 2, 3))
	if got := decided(c.Ready()); !slices.Equal(got, []uint64{2, 1}) {
		t.Fatalf("PartitionContinue delivered %v, want [2 1]", got)
	}
}

// TestInQuorum is the rule's table.
func TestInQuorum(t *testing.T) {
	for _, c := range []struct {
		m, lost    int
		lowestLost bool
		want       bool
	}{
		{10, 4, true, true}, {10, 6, false, false}, {10, 5, false, true}, {10, 5, true, false},
		{5, 2, true, true}, {5, 3, false, false}, {1, 0, false, true}, {2, 1, false, true}, {2, 1, true, false},
	} {
		if got := inQuorum(c.m, c.lost, c.lowestLost); got != c.want {
			t.Errorf("inQuorum(%d, %d, %v) = %v, want %v", c.m, c.lost, c.lowestLost, got, c.want)
		}
	}
}
