package bcast

import (
	"math/bits"

	"github.com/vigil-hpc/vigil/ranks"
)

// HBA is the double hypercube broadcast of seed 000 §2 (Algorithm 1, task
// T5), built on the reliable hypercube broadcast of Ramanathan and Shin
// (1988).
//
// The participants A = {0..n-1} \ D (D is the source's dead list, carried in
// the message) are sorted and labelled relative to the source s:
// label(x) = (index of x in A − index of s in A) mod m, m = |A|, so s has
// label 0. With k = ⌊log2 m⌋ (2^k ≤ m < 2^(k+1)) two hypercubes Q_k of 2^k
// nodes each contain s:
//   - cube 1 holds labels 0..2^k−1, with cube coordinate c = label;
//   - cube 2 holds labels (m − j) mod m for 0 ≤ j < 2^k, with coordinate
//     c = (m − label) mod m.
//
// Since m − 2^k + 1 ≤ 2^k, their union is all of A. Neighbors(self) lists,
// for each cube self belongs to (cube 1 first, then cube 2), the nodes at
// coordinates c XOR 2^j for j = 0..k−1, without duplicates and never self.
//
// Every node forwards a broadcast once, to all of Neighbors, on its first
// reception (forward-once flooding over both hypercubes). Fault tolerance:
// Q_k has vertex connectivity k, so removing any k−1 or fewer vertices
// leaves it connected; Ramanathan and Shin's guarantee is the equivalent
// statement that Q_k has k vertex-disjoint paths between any two nodes, so
// k−1 failures cut at most k−1 of them. Let F be the participants that fail
// during the broadcast (|F| ≤ k−1, the source alive until it has sent to all
// its neighbours; a failing node may send any prefix of its list, or
// nothing). In each cube, Q_k \ F is connected and contains s; along a path
// from s to any alive node y in it, every node receives the message (by
// induction: its predecessor received it, and being alive, forwarded it on
// first reception to all its cube neighbours, including this one). So every
// alive participant receives it, whatever the message delivery order, and
// the same D must be used by every participant — hence D travels in the
// message. Without failures a node of coordinate c is reached after
// popcount(c) ≤ k hops.
//
// Neighbors costs O(k) label computations, each O(log n · log |D|) through
// ranks.Set.AliveAt; it never does O(n) work, so it stays cheap at
// n = 256,000.
type HBA struct{}

// Name returns "hba".
func (HBA) Name() string { return "hba" }

// Neighbors returns the ranks to which self forwards a broadcast of source
// over A = {0..n-1} \ D: its cube-1 neighbours, then its cube-2 neighbours
// not already listed. It returns nil if self or source is not in A. The
// returned slice is new and owned by the caller.
func (HBA) Neighbors(self, source ranks.Rank, n int, D *ranks.Set) []ranks.Rank {
	l, x, ok := newLabelling(self, source, n, D)
	if !ok {
		return nil
	}
	m := l.m
	k := bits.Len(uint(m)) - 1
	K := 1 << k
	var buf [2 * 64]int
	labels := buf[:0]
	if x < K { // cube 1: coordinate = label
		for j := 0; j < k; j++ {
			labels = append(labels, x^(1<<j))
		}
	}
	n1 := len(labels)
	if c := (m - x) % m; c < K { // cube 2: coordinate = (m − label) mod m
	next:
		for j := 0; j < k; j++ {
			y := (m - (c ^ (1 << j))) % m
			for _, z := range labels[:n1] {
				if z == y {
					continue next
				}
			}
			labels = append(labels, y)
		}
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
