package sim

import (
	"math/bits"

	"github.com/vigil-hpc/vigil/bcast"
)

// GreedyTree returns bcast.GreedyTree over m nodes for a hop of ℓ+1 steps
// as a table: labels are given in the order nodes are reached; place maps
// a label to its ring position (nil: identity). Children are listed in
// send order.
func GreedyTree(m, ell int, place func(label int) int) *FloodTable {
	g := bcast.NewGreedyTree(m, ell)
	if place == nil {
		place = func(l int) int { return l }
	}
	pos := make([]int, m)
	lab := make([]int, m)
	for l := range m {
		pos[l] = place(l)
		lab[pos[l]] = l
	}
	t := &FloodTable{Name: "greedy", M: m, off: make([]int32, m+1)}
	for p := range m {
		for _, c := range g.Children(lab[p]) {
			t.to = append(t.to, uint32(pos[c]))
		}
		t.off[p+1] = int32(len(t.to))
	}
	return t
}

// BitReversePlace returns the placement of labels 0..m-1 on the ring that
// spreads consecutive labels as far apart as possible: label ℓ goes to the
// rank of bitreverse(ℓ) among the bit-reversed labels (a permutation; for a
// power of two m it is bitreverse itself).
func BitReversePlace(m int) func(int) int {
	k := bits.Len(uint(m - 1))
	rev := func(l int) int { return int(bits.Reverse64(uint64(l)) >> (64 - k)) }
	if k == 0 {
		return func(int) int { return 0 }
	}
	// rank[r] for the bit-reversed values present.
	present := make([]bool, 1<<k)
	for l := range m {
		present[rev(l)] = true
	}
	rank := make([]int, 1<<k)
	c := 0
	for v := range present {
		rank[v] = c
		if present[v] {
			c++
		}
	}
	return func(l int) int { return rank[rev(l)] }
}
