package era

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/vigil-hpc/vigil/ranks"
)

// Tree is the paper's pair of functions Parent(S, p) and Children(S, p)
// (Section 2): the agreement tree mended over a set S of ranks marked dead.
// Implementations must be pure functions of their arguments and safe to
// share between cores.
type Tree interface {
	// Parent returns the parent of r in the tree mended over dead, and
	// ok = false if r is the root (Parent(S, r) = ⊥).
	Parent(r ranks.Rank, dead *ranks.Set) (parent ranks.Rank, ok bool)
	// Children returns {q | Parent(dead, q) = r}, in no particular order.
	Children(r ranks.Rank, dead *ranks.Set) []ranks.Rank
}

// Shape is a flat tree shape over labels 0..m-1 in heap order: label l ≥ 1
// has parent ⌊(l−1)/k⌋ for a k-ary shape, and 0 for the star.
type Shape struct {
	k int // branching factor; 0 is the star
}

// Flat shapes used by the paper (Section 4, Topologies).
var (
	// BinaryShape is the binary tree of Figure 1b.
	BinaryShape = Shape{k: 2}
	// StarShape connects every label to label 0 (Figure 1a).
	StarShape = Shape{k: 0}
	// StringShape is the chain 0 ← 1 ← 2 ← ….
	StringShape = Shape{k: 1}
)

// KAryShape returns the k-ary shape (k ≥ 1; 1 is StringShape).
func KAryShape(k int) Shape {
	if k < 1 {
		panic(fmt.Sprintf("era: KAryShape(%d): k must be ≥ 1", k))
	}
	return Shape{k: k}
}

// String names the shape as the paper does (bin, star, …).
func (s Shape) String() string {
	switch s.k {
	case 0:
		return "star"
	case 1:
		return "string"
	case 2:
		return "bin"
	}
	return fmt.Sprintf("%d-ary", s.k)
}

// parent returns the parent label of l ≥ 1.
func (s Shape) parent(l int) int {
	if s.k == 0 {
		return 0
	}
	return (l - 1) / s.k
}

// kids returns the range [lo, hi) of the children labels of l among m.
func (s Shape) kids(l, m int) (lo, hi int) {
	if s.k == 0 {
		if l == 0 {
			return 1, m
		}
		return 0, 0
	}
	lo = s.k*l + 1
	hi = min(lo+s.k, m)
	return min(lo, hi), hi
}

// HeapTree is a rooted tree over a set of member ranks, each with a label
// such that every parent's label is smaller than its children's. It is
// mended over a dead set exactly as the paper mends the binary tree:
//
//	Anc(S, p) = the alive original ancestors of p
//	Eld(S, p) = the alive members whose label is smaller than p's
//	Parent(S, p) = the nearest element of Anc (max Anc in the paper's
//	               labelling) if Anc ≠ ∅, else min Eld if Eld ≠ ∅, else ⊥.
//
// So a dead node's children are spliced to its nearest alive ancestor, the
// root is the alive member of smallest label, and members without an alive
// ancestor hang from the root. The paper writes Anc with ⌊p/2^i⌋, which is
// the heap of labels 1..n; with labels from 0 (and Figure 1b, where 0 has
// children 1 and 2) the ancestors are ⌊(p+1)/2^i⌋−1.
//
// Flat trees (Binary, Star, String, KAry, NewFlat) are computed; the
// hierarchical X/Y trees of Section 4 (NewHierarchical) are tabulated. A
// HeapTree is immutable and safe to share.
type HeapTree struct {
	m       int
	rankOf  []ranks.Rank // label → rank; nil: identity
	labelOf []int32      // rank → label, −1 for non-members; nil: identity

	flat Shape
	// Tabulated shape (hierarchical trees): up[l] is the parent label (−1
	// for 0), the children of l are down[first[l]:first[l+1]].
	up, first, down []int32

	// Recipe used by Over.
	hier   bool
	x, y   Shape
	nodeOf []int
}

// Binary returns the binary tree over ranks 0..n-1 (Figure 1b).
func Binary(n int) *HeapTree { return NewFlat(BinaryShape, All(n)) }

// Star returns the star over ranks 0..n-1, rooted at 0 (Figure 1a).
func Star(n int) *HeapTree { return NewFlat(StarShape, All(n)) }

// String returns the chain over ranks 0..n-1: the parent of r is r−1.
func String(n int) *HeapTree { return NewFlat(StringShape, All(n)) }

// KAry returns the k-ary tree over ranks 0..n-1 (k ≥ 1).
func KAry(k, n int) *HeapTree { return NewFlat(KAryShape(k), All(n)) }

// All returns the ranks 0..n-1.
func All(n int) []ranks.Rank {
	rs := make([]ranks.Rank, n)
	for i := range rs {
		rs[i] = ranks.Rank(i)
	}
	return rs
}

// NewFlat returns the tree of shape s over members, labelled in increasing
// rank order (member i gets label i). It is the tree of the paper's tree
// rebalancing when members are the survivors of a previous agreement.
// Members must be distinct; they are sorted on a copy.
func NewFlat(s Shape, members []ranks.Rank) *HeapTree {
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	t := &HeapTree{m: len(ms), flat: s, x: s}
	if !isIdentity(ms) {
		t.setLabels(ms)
	}
	return t
}

// NewHierarchical returns the X/Y tree of Section 4: the members are grouped
// by node (nodeOf[r] is the node of rank r), the lowest member of each node
// is its leader, the leaders form an x-shaped tree (nodes ordered by their
// lowest member) and the members of each node form a y-shaped tree below
// their leader. bin/bin is (BinaryShape, BinaryShape), bin/star is
// (BinaryShape, StarShape). Leaders get labels 0..G−1 and the other members
// follow node by node, so the paper's mending applies unchanged: a dead
// leader's local members and child leaders are spliced to its parent
// leader, and the next leader becomes root when the root node's leader dies.
// Every member r must satisfy r < len(nodeOf).
func NewHierarchical(x, y Shape, nodeOf []int, members []ranks.Rank) *HeapTree {
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	for _, r := range ms {
		if int(r) >= len(nodeOf) {
			panic(fmt.Sprintf("era: NewHierarchical: member %d has no node (len(nodeOf) = %d)", r, len(nodeOf)))
		}
	}
	// Group members by node, nodes ordered by their lowest member.
	groups := map[int][]ranks.Rank{}
	var order []int
	for _, r := range ms {
		nd := nodeOf[r]
		if _, ok := groups[nd]; !ok {
			order = append(order, nd)
		}
		groups[nd] = append(groups[nd], r)
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(groups[a][0], groups[b][0]) })
	m := len(ms)
	rankOf := make([]ranks.Rank, 0, m)
	up := make([]int32, m)
	for i, nd := range order {
		rankOf = append(rankOf, groups[nd][0])
		up[i] = -1
		if i > 0 {
			up[i] = int32(x.parent(i))
		}
	}
	for i, nd := range order {
		base := len(rankOf) // label of local index 1
		for j, r := range groups[nd][1:] {
			rankOf = append(rankOf, r)
			local := y.parent(j + 1)
			if local == 0 {
				up[base+j] = int32(i)
			} else {
				up[base+j] = int32(base + local - 1)
			}
		}
	}
	t := &HeapTree{m: m, hier: true, x: x, y: y, nodeOf: nodeOf, up: up}
	// Children lists in CSR form.
	t.first = make([]int32, m+1)
	for l := 1; l < m; l++ {
		t.first[up[l]+1]++
	}
	for l := range m {
		t.first[l+1] += t.first[l]
	}
	t.down = make([]int32, max(m-1, 0))
	fill := slices.Clone(t.first[:m])
	for l := 1; l < m; l++ {
		p := up[l]
		t.down[fill[p]] = int32(l)
		fill[p]++
	}
	t.setLabels(rankOf)
	return t
}

// Over returns the same kind of tree (same shapes, same node map) over
// members only: the paper's tree rebalancing between agreements, with
// members = Survivors of the last decision.
func (t *HeapTree) Over(members []ranks.Rank) *HeapTree {
	if t.hier {
		return NewHierarchical(t.x, t.y, t.nodeOf, members)
	}
	return NewFlat(t.flat, members)
}

// Len returns the number of members.
func (t *HeapTree) Len() int { return t.m }

// Contains reports whether r is a member of the tree.
func (t *HeapTree) Contains(r ranks.Rank) bool {
	_, ok := t.label(r)
	return ok
}

// Root returns the rank with label 0 (the root when nobody is dead).
func (t *HeapTree) Root() ranks.Rank { return t.rank(0) }

// String names the tree, such as bin(32) or bin/star(64).
func (t *HeapTree) String() string {
	if t.hier {
		return fmt.Sprintf("%v/%v(%d)", t.x, t.y, t.m)
	}
	return fmt.Sprintf("%v(%d)", t.flat, t.m)
}

func isIdentity(ms []ranks.Rank) bool {
	for i, r := range ms {
		if r != ranks.Rank(i) {
			return false
		}
	}
	return true
}

func (t *HeapTree) setLabels(rankOf []ranks.Rank) {
	t.rankOf = rankOf
	mx := ranks.Rank(0)
	for _, r := range rankOf {
		mx = max(mx, r)
	}
	t.labelOf = make([]int32, int(mx)+1)
	for i := range t.labelOf {
		t.labelOf[i] = -1
	}
	for l, r := range rankOf {
		t.labelOf[r] = int32(l)
	}
}

func (t *HeapTree) label(r ranks.Rank) (int, bool) {
	if t.labelOf == nil {
		return int(r), int64(r) < int64(t.m)
	}
	if int64(r) >= int64(len(t.labelOf)) || t.labelOf[r] < 0 {
		return 0, false
	}
	return int(t.labelOf[r]), true
}

func (t *HeapTree) rank(l int) ranks.Rank {
	if t.rankOf == nil {
		return ranks.Rank(l)
	}
	return t.rankOf[l]
}

func (t *HeapTree) parentLabel(l int) int {
	if l == 0 {
		return -1
	}
	if t.up != nil {
		return int(t.up[l])
	}
	return t.flat.parent(l)
}

// appendKids appends the original children labels of l.
func (t *HeapTree) appendKids(dst []int32, l int) []int32 {
	if t.up != nil {
		return append(dst, t.down[t.first[l]:t.first[l+1]]...)
	}
	lo, hi := t.flat.kids(l, t.m)
	for c := lo; c < hi; c++ {
		dst = append(dst, int32(c))
	}
	return dst
}

var noDead ranks.Set

func deadOrNone(dead *ranks.Set) *ranks.Set {
	if dead == nil {
		return &noDead
	}
	return dead
}

// Parent implements Tree with the paper's Anc/Eld rule.
func (t *HeapTree) Parent(r ranks.Rank, dead *ranks.Set) (ranks.Rank, bool) {
	dead = deadOrNone(dead)
	l, ok := t.label(r)
	if !ok {
		return 0, false
	}
	for a := t.parentLabel(l); a >= 0; a = t.parentLabel(a) { // max Anc
		if ar := t.rank(a); !dead.Has(ar) {
			return ar, true
		}
	}
	for e := range l { // min Eld
		if er := t.rank(e); !dead.Has(er) {
			return er, true
		}
	}
	return 0, false
}

// Children implements Tree: the alive nodes reached from r through dead
// descendants and, if r is the root, the alive members without an alive
// ancestor.
func (t *HeapTree) Children(r ranks.Rank, dead *ranks.Set) []ranks.Rank {
	dead = deadOrNone(dead)
	l, ok := t.label(r)
	if !ok {
		return nil
	}
	var out []ranks.Rank
	var stack []int32
	walk := func(from int, skip int) {
		stack = t.appendKids(stack[:0], from)
		for len(stack) > 0 {
			c := int(stack[len(stack)-1])
			stack = stack[:len(stack)-1]
			if c == skip {
				continue
			}
			if cr := t.rank(c); !dead.Has(cr) {
				out = append(out, cr)
			} else {
				stack = t.appendKids(stack, c)
			}
		}
	}
	walk(l, -1)
	if l > 0 {
		for e := range l {
			if !dead.Has(t.rank(e)) {
				return out // r is not the root
			}
		}
		// r is the root (min alive label) but label 0 is dead: it adopts
		// every alive member whose ancestors are all dead.
		walk(0, l)
	}
	return out
}

// Survivors returns the ranks of 0..n-1 that are not in dead, in increasing
// order: the agreed group of a shrink (MPIX_COMM_SHRINK) when dead is the
// dead set of a decision, and the members of a rebalanced tree (Over).
func Survivors(n int, dead ranks.Set) []ranks.Rank {
	out := make([]ranks.Rank, 0, max(n-dead.Len(), 0))
	for r := range n {
		if !dead.Has(ranks.Rank(r)) {
			out = append(out, ranks.Rank(r))
		}
	}
	return out
}
