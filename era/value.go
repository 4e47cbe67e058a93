package era

import (
	"bytes"

	"github.com/vigil-hpc/vigil/ranks"
)

// value is a contribution or a decision: the paper's Current and Result,
// with the parts every agreement decides implicitly. Combining two values
// (merge) is F on v, ∪ on dead, ∩ on acked and min on collect; each is
// associative, commutative and idempotent, so the extended F is too.
type value struct {
	ok      bool      // false: ⊥
	v       []byte    // F over the contributed values
	dead    ranks.Set // ∪ of the contributors' known-dead sets
	acked   ranks.Set // ∩ of the contributors' acknowledged sets (⊆ dead)
	collect uint64    // min of the contributors' lowest undecided Seq
}

// merge sets *dst to F(*dst, *src). dst never aliases src afterwards.
func merge(op Op, dst, src *value) {
	if !src.ok {
		return
	}
	if !dst.ok {
		*dst = value{ok: true, v: bytes.Clone(src.v), dead: src.dead.Clone(), acked: src.acked.Clone(), collect: src.collect}
		return
	}
	dst.v = op.Merge(dst.v, src.v)
	dst.dead.AddAll(src.dead)
	dst.acked = intersect(dst.acked, &src.acked)
	dst.collect = min(dst.collect, src.collect)
}

func (v *value) clone() value {
	return value{ok: v.ok, v: bytes.Clone(v.v), dead: v.dead.Clone(), acked: v.acked.Clone(), collect: v.collect}
}

// intersect returns a ∩ b, reusing a when nothing is removed.
func intersect(a ranks.Set, b *ranks.Set) ranks.Set {
	ms := a.Members()
	keep := 0
	for _, r := range ms {
		if b.Has(r) {
			keep++
		}
	}
	if keep == len(ms) {
		return a
	}
	out := make([]ranks.Rank, 0, keep)
	for _, r := range ms {
		if b.Has(r) {
			out = append(out, r)
		}
	}
	s, _ := ranks.FromSorted(out)
	return s
}

// subset reports whether a ⊆ b.
func subset(a, b *ranks.Set) bool {
	if a.Len() > b.Len() {
		return false
	}
	for _, r := range a.Members() {
		if !b.Has(r) {
			return false
		}
	}
	return true
}
