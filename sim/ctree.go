package sim

import "math/bits"

// GreedyTree returns the LogP-optimal broadcast tree over m nodes for a
// hop of ℓ+1 steps after the send step (seed 002's timing, time unit o,
// g = o): every reached node sends to a new node in every step until all
// are reached, so the number reached grows as I(s) = I(s−1) + I(s−ℓ−2)
// instead of doubling every hop as in a binomial tree. Labels are given in
// the order nodes are reached; place maps a label to its ring position
// (nil: identity). Children are listed in send order.
func GreedyTree(m, ell int, place func(label int) int) *FloodTable {
	type node struct {
		tau  int
		kids []int32
	}
	ns := make([]node, 1, m)
	for s := 1; len(ns) < m; s++ {
		// Senders are the nodes reached by s−1, in label order.
		k := len(ns)
		for x := 0; x < k && len(ns) < m; x++ {
			if ns[x].tau > s-1 {
				break // labels are in order of tau
			}
			ns[x].kids = append(ns[x].kids, int32(len(ns)))
			ns = append(ns, node{tau: s + ell + 1})
		}
	}
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
		for _, c := range ns[lab[p]].kids {
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
