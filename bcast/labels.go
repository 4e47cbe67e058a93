package bcast

import (
	"math"

	"github.com/vigil-hpc/vigil/ranks"
)

// labelling is the relabelling shared by the overlays: the participants
// A = {0..n-1} \ D, sorted, get labels relative to the source s,
// label(x) = (index of x in A − index of s in A) mod m with m = |A|, so the
// source is label 0. Both directions cost a binary search in D, never O(n).
type labelling struct {
	D   *ranks.Set
	n   int
	m   int // |A|
	src int // index of the source in A
}

// emptySet stands for a nil D. It is only read.
var emptySet ranks.Set

// newLabelling labels A relative to source and returns the label of self.
// ok is false if self or source is not a participant (in D or >= n).
func newLabelling(self, source ranks.Rank, n int, D *ranks.Set) (l labelling, selfLabel int, ok bool) {
	if D == nil {
		D = &emptySet
	}
	si, ok1 := D.AliveLabel(source, n)
	xi, ok2 := D.AliveLabel(self, n)
	if !ok1 || !ok2 {
		return labelling{}, 0, false
	}
	l = labelling{D: D, n: n, m: aliveCount(n, D), src: si}
	return l, l.label(xi), true
}

// aliveCount returns |{0..n-1} \ D|.
func aliveCount(n int, D *ranks.Set) int {
	if n <= 0 {
		return 0
	}
	if int64(n) > math.MaxUint32 {
		return n - D.Len()
	}
	return n - D.CountBelow(ranks.Rank(n))
}

// label converts an index in A into a label relative to the source.
func (l *labelling) label(idx int) int {
	d := idx - l.src
	if d < 0 {
		d += l.m
	}
	return d
}

// rank returns the participant with the given label (0 <= label < m).
func (l *labelling) rank(label int) ranks.Rank {
	idx := label + l.src
	if idx >= l.m {
		idx -= l.m
	}
	return l.D.AliveAt(idx, l.n)
}
