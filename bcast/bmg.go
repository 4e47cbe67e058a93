package bcast

import (
	"math/bits"

	"github.com/vigil-hpc/vigil/ranks"
)

// BMG is the binomial-graph broadcast of seed 003 (Algorithm 1,
// ReliableBroadcast and Forwarding): every node forwards a broadcast once,
// on its first reception, to its binomial-graph neighbours.
//
// Deviation from seed 003: the seed links raw ranks, i ± 2^j mod N. Here the
// graph is built over the same labelled participant set as HBA: the ranks of
// A = {0..n-1} \ D (D carried in the message), sorted and labelled relative
// to the source s (s has label 0), m = |A|, and the neighbours of label ℓ are
// ℓ ± 2^j mod m for j = 0..⌈log2 m⌉−1. With raw ranks, every cumulative
// failure removes a vertex from the graph and many dead ranks can cut it;
// relabelling over the alive set keeps a complete binomial graph over the
// survivors, so its connectivity does not erode. Without dead ranks the
// neighbour set is the seed's one.
//
// Sending order: first self's children in the binomial spanning tree rooted
// at the source (ℓ + 2^j for 2^j > ℓ and ℓ + 2^j < m, by increasing j), as
// the seed sends spanning-tree messages first, then the other neighbours
// (ℓ + 2^j, ℓ − 2^j mod m, by increasing j). Without failures the tree alone
// reaches label ℓ after popcount(ℓ) ≤ ⌈log2 m⌉ hops; the other edges give
// redundant paths. The binomial graph's vertex connectivity equals its
// degree (Angskun et al., cited by seed 003), at least k = ⌊log2 m⌋, so, by
// the argument given for HBA, forward-once flooding reaches every alive
// participant if at most k−1 participants other than the source fail during
// the broadcast. The tests check this exhaustively for m ≤ 40 and at random
// up to n = 4096.
type BMG struct{}

// Name returns "bmg".
func (BMG) Name() string { return "bmg" }

// Neighbors returns the ranks to which self forwards a broadcast of source
// over A = {0..n-1} \ D, spanning-tree children first. It returns nil if
// self or source is not in A. The returned slice is new and owned by the
// caller.
func (BMG) Neighbors(self, source ranks.Rank, n int, D *ranks.Set) []ranks.Rank {
	l, x, ok := newLabelling(self, source, n, D)
	if !ok {
		return nil
	}
	m := l.m
	d := bits.Len(uint(m - 1)) // ⌈log2 m⌉; 2^(d-1) < m, so ℓ ± 2^j ≠ ℓ
	var buf [2 * 64]int
	labels := buf[:0]
	add := func(y int) {
		for _, z := range labels {
			if z == y {
				return
			}
		}
		labels = append(labels, y)
	}
	for j := 0; j < d; j++ { // binomial spanning-tree children
		if p := 1 << j; p > x && x+p < m {
			labels = append(labels, x+p)
		}
	}
	for j := 0; j < d; j++ {
		p := 1 << j
		add((x + p) % m)
		add((x - p%m + m) % m)
	}
	if len(labels) == 0 {
		return nil
	}
	out := make([]ranks.Rank, len(labels))
	for i, y := range labels {
		out[i] = l.rank(y)
	}
	return out
}
