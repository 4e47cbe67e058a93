package sim

import (
	"math/bits"

	"github.com/vigil-hpc/vigil/ranks"
)

// Binomial is the binomial spanning tree, the optimal broadcast without
// fault tolerance ("opt" of seed 002 Figure 7a): over the participants
// A = {0..n-1} \ D labelled relative to the source (as bcast.HBA does), label
// ℓ sends to ℓ + 2^j for every j with 2^j > ℓ and ℓ + 2^j < m, by
// increasing j, which is largest subtree first (the subtree of ℓ + 2^j
// holds the labels that extend it with higher bits). In the telephone model
// (one message per node per round) it takes ⌈log2 m⌉ rounds, and in LogP
// with g ≤ 2o+L it takes ⌈log2 m⌉ (2o + L). It implements bcast.Overlay.
type Binomial struct{}

// Name returns "binomial".
func (Binomial) Name() string { return "binomial" }

// Neighbors implements bcast.Overlay.
func (Binomial) Neighbors(self, source ranks.Rank, n int, D *ranks.Set) []ranks.Rank {
	l, x, ok := label(self, source, n, D)
	if !ok {
		return nil
	}
	var out []ranks.Rank
	for j := bits.Len(uint(x)); x+1<<j < l.m; j++ {
		out = append(out, l.rank(x+1<<j))
	}
	return out
}

// BIG is the binomial graph of seed 002 §IV.B.3 over raw ranks: node p is
// linked to p + 2^x mod N for 0 ≤ x < ⌈log2 N⌉, and forwards the first copy
// it receives to all its links. It is static: dead ranks stay in the graph
// (D is ignored), which is how seed 002 models it. Links are sent in the
// order that makes the failure-free latency that of a binomial tree: the
// tree's children relative to the source first (as Binomial orders them),
// then the other links. It implements bcast.Overlay.
type BIG struct{}

// Name returns "big".
func (BIG) Name() string { return "big" }

// Neighbors implements bcast.Overlay.
func (BIG) Neighbors(self, source ranks.Rank, n int, _ *ranks.Set) []ranks.Rank {
	if int64(self) >= int64(n) || int64(source) >= int64(n) {
		return nil
	}
	x := (int(self) - int(source) + n) % n
	d := bits.Len(uint(n - 1))
	out := make([]ranks.Rank, 0, d)
	for j := bits.Len(uint(x)); x+1<<j < n; j++ { // tree children
		out = append(out, ranks.Rank((int(self)+1<<j)%n))
	}
	for j := range d { // the other links
		if 1<<j > x && x+1<<j < n {
			continue
		}
		y := ranks.Rank((int(self) + 1<<j) % n)
		if y != self {
			out = append(out, y)
		}
	}
	return out
}

// labels is the relabelling of bcast's overlays: participants sorted and
// numbered relative to the source.
type labels struct {
	D   *ranks.Set
	n   int
	m   int
	src int
}

var noDead ranks.Set

func label(self, source ranks.Rank, n int, D *ranks.Set) (labels, int, bool) {
	if D == nil {
		D = &noDead
	}
	si, ok1 := D.AliveLabel(source, n)
	xi, ok2 := D.AliveLabel(self, n)
	if !ok1 || !ok2 {
		return labels{}, 0, false
	}
	l := labels{D: D, n: n, m: n - D.CountBelow(ranks.Rank(n)), src: si}
	return l, (xi - si + l.m) % l.m, true
}

func (l *labels) rank(y int) ranks.Rank {
	return l.D.AliveAt((y+l.src)%l.m, l.n)
}
