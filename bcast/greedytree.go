package bcast

import "math/bits"

// GreedyTree is the LogP-optimal broadcast tree over M nodes for a hop of
// ℓ+1 steps after the send step (seed 002's timing, time unit o, g = o):
// every reached node sends to a new node in every step until all are
// reached, so the number reached grows as I(s) = I(s−1) + I(s−ℓ−2)
// instead of doubling every hop as in a binomial tree. Labels are given in
// the order nodes are reached (the root is 0). It is the dissemination
// phase of the corrected tree (Gossip with Tree set).
type GreedyTree struct {
	m, ell int
	// Per step s ≥ 1: first[s] is the first label sent to in step s and
	// senders[s] how many nodes send in it (labels 0..senders[s]−1).
	first, senders []int
}

// NewGreedyTree returns the greedy tree over m ≥ 1 nodes for hops of
// ell+1 steps. It costs O(log m · (ell+2)) time and memory.
func NewGreedyTree(m, ell int) *GreedyTree {
	t := &GreedyTree{m: m, ell: ell, first: []int{0}, senders: []int{0}}
	next := 1 // labels given so far
	for s := 1; next < m; s++ {
		// Senders are the nodes reached by s−1: the root and every label
		// sent in a step s' with s'+ℓ+1 ≤ s−1.
		k := 1
		if j := s - ell - 2; j >= 1 {
			k = min(t.first[j]+t.senders[j], m)
		}
		t.first = append(t.first, next)
		t.senders = append(t.senders, k)
		next = min(next+k, m)
	}
	return t
}

// Size returns the number of nodes.
func (t *GreedyTree) Size() int { return t.m }

// Reached returns the step at which label x is reached in a failure-free
// run (0 for the root).
func (t *GreedyTree) Reached(x int) int {
	for s := len(t.first) - 1; s >= 1; s-- {
		if x >= t.first[s] {
			return s + t.ell + 1
		}
	}
	return 0
}

// Children returns label x's children in send order: x sends to its i-th
// child in step Reached(x)+1+i.
func (t *GreedyTree) Children(x int) []int {
	var kids []int
	for s := 1; s < len(t.first); s++ {
		if x < t.senders[s] && t.first[s]+x < t.m {
			kids = append(kids, t.first[s]+x)
		}
	}
	return kids
}

// Span returns the first step at which no node sends any more in a
// failure-free run: gossiping until T = Span lets the tree finish.
func (t *GreedyTree) Span() int {
	return len(t.first)
}

// BinomialTree is the binomial broadcast tree over M nodes, timed as
// GreedyTree is (a node sends to its i-th child i+1 steps after it was
// reached): label x sends to x + 2^j for every j with 2^j > x and
// x + 2^j < M, by increasing j. It is a poor LogP tree, the simulator's
// control for the corrected tree.
type BinomialTree struct {
	m, ell int
}

// NewBinomialTree returns the binomial tree over m ≥ 1 nodes for hops of
// ell+1 steps.
func NewBinomialTree(m, ell int) *BinomialTree { return &BinomialTree{m: m, ell: ell} }

// Children returns label x's children in send order.
func (t *BinomialTree) Children(x int) []int {
	var kids []int
	for j := bits.Len(uint(x)); x+1<<j < t.m; j++ {
		kids = append(kids, x+1<<j)
	}
	return kids
}

// Span returns the first step at which no node sends any more in a
// failure-free run. It costs O(m log m) time and O(m) memory.
func (t *BinomialTree) Span() int {
	span := 1
	tau := make([]int, t.m) // a parent's label is below its children's
	for x := range t.m {
		for i, c := range t.Children(x) {
			st := tau[x] + 1 + i
			tau[c] = st + t.ell + 1
			span = max(span, st+1)
		}
	}
	return span
}
