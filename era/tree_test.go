package era

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

func sorted(rs []ranks.Rank) []ranks.Rank {
	rs = slices.Clone(rs)
	slices.Sort(rs)
	if rs == nil {
		rs = []ranks.Rank{}
	}
	return rs
}

type treeCase struct {
	name     string
	tree     Tree
	dead     []ranks.Rank
	parent   map[ranks.Rank]int // −1: root (⊥)
	children map[ranks.Rank][]ranks.Rank
}

func (tc treeCase) check(t *testing.T) {
	t.Helper()
	dead := ranks.Of(tc.dead...)
	for r, want := range tc.parent {
		p, ok := tc.tree.Parent(r, &dead)
		got := int(p)
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("%s: Parent(%d) = %d, want %d", tc.name, r, got, want)
		}
	}
	for r, want := range tc.children {
		if got := sorted(tc.tree.Children(r, &dead)); !slices.Equal(got, sorted(want)) {
			t.Errorf("%s: Children(%d) = %v, want %v", tc.name, r, got, want)
		}
	}
}

// TestFigure1 checks the mended trees of the paper's Figure 1 (process 1
// dead in a star and in a binary tree) and further mendings of the binary
// tree by the Anc/Eld rule.
func TestFigure1(t *testing.T) {
	cases := []treeCase{
		{name: "star, nobody dead", tree: Star(4),
			parent:   map[ranks.Rank]int{0: -1, 1: 0, 2: 0, 3: 0},
			children: map[ranks.Rank][]ranks.Rank{0: {1, 2, 3}, 1: nil}},
		{name: "Figure 1a: star, 1 dead", tree: Star(4), dead: []ranks.Rank{1},
			parent:   map[ranks.Rank]int{0: -1, 2: 0, 3: 0},
			children: map[ranks.Rank][]ranks.Rank{0: {2, 3}, 2: nil, 3: nil}},
		{name: "star, root 0 dead", tree: Star(4), dead: []ranks.Rank{0},
			parent:   map[ranks.Rank]int{1: -1, 2: 1, 3: 1},
			children: map[ranks.Rank][]ranks.Rank{1: {2, 3}, 2: nil}},
		{name: "binary, nobody dead", tree: Binary(7),
			parent:   map[ranks.Rank]int{0: -1, 1: 0, 2: 0, 3: 1, 4: 1, 5: 2, 6: 2},
			children: map[ranks.Rank][]ranks.Rank{0: {1, 2}, 1: {3, 4}, 2: {5, 6}, 3: nil}},
		{name: "Figure 1b: binary, 1 dead", tree: Binary(7), dead: []ranks.Rank{1},
			parent:   map[ranks.Rank]int{0: -1, 2: 0, 3: 0, 4: 0, 5: 2, 6: 2},
			children: map[ranks.Rank][]ranks.Rank{0: {2, 3, 4}, 2: {5, 6}, 3: nil, 4: nil}},
		{name: "binary, root 0 dead: 1 is root, 2 hangs from it (Eld)", tree: Binary(7), dead: []ranks.Rank{0},
			parent:   map[ranks.Rank]int{1: -1, 2: 1, 3: 1, 4: 1, 5: 2, 6: 2},
			children: map[ranks.Rank][]ranks.Rank{1: {2, 3, 4}, 2: {5, 6}}},
		{name: "binary, 0 and 1 dead", tree: Binary(7), dead: []ranks.Rank{0, 1},
			parent:   map[ranks.Rank]int{2: -1, 3: 2, 4: 2, 5: 2, 6: 2},
			children: map[ranks.Rank][]ranks.Rank{2: {3, 4, 5, 6}, 3: nil}},
		{name: "binary, 0 and 2 dead", tree: Binary(7), dead: []ranks.Rank{0, 2},
			parent:   map[ranks.Rank]int{1: -1, 3: 1, 4: 1, 5: 1, 6: 1},
			children: map[ranks.Rank][]ranks.Rank{1: {3, 4, 5, 6}}},
		{name: "binary 15, 1 and 3 dead: 7, 8 climb to 0", tree: Binary(15), dead: []ranks.Rank{1, 3},
			parent:   map[ranks.Rank]int{4: 0, 7: 0, 8: 0, 9: 4, 2: 0},
			children: map[ranks.Rank][]ranks.Rank{0: {2, 4, 7, 8}, 4: {9, 10}}},
		{name: "string, 1 dead", tree: String(4), dead: []ranks.Rank{1},
			parent:   map[ranks.Rank]int{0: -1, 2: 0, 3: 2},
			children: map[ranks.Rank][]ranks.Rank{0: {2}, 2: {3}}},
		{name: "string, 0 and 1 dead", tree: String(4), dead: []ranks.Rank{0, 1},
			parent:   map[ranks.Rank]int{2: -1, 3: 2},
			children: map[ranks.Rank][]ranks.Rank{2: {3}}},
		{name: "3-ary, 1 dead", tree: KAry(3, 13), dead: []ranks.Rank{1},
			parent:   map[ranks.Rank]int{4: 0, 5: 0, 6: 0, 7: 2, 12: 3},
			children: map[ranks.Rank][]ranks.Rank{0: {2, 3, 4, 5, 6}, 2: {7, 8, 9}}},
	}
	for _, tc := range cases {
		tc.check(t)
	}
}

// paperParent is the paper's definition for the binary tree, written with
// the 1-based heap labels of its formula (label = rank + 1).
func paperParent(p ranks.Rank, dead *ranks.Set) (ranks.Rank, bool) {
	var anc []ranks.Rank
	for x := (p + 1) / 2; x >= 1; x /= 2 {
		if !dead.Has(x - 1) {
			anc = append(anc, x-1)
		}
	}
	if len(anc) > 0 {
		return slices.Max(anc), true
	}
	for q := range p {
		if !dead.Has(q) {
			return q, true
		}
	}
	return 0, false
}

func randomDead(rng *rand.Rand, n int) ranks.Set {
	var d ranks.Set
	k := rng.IntN(n)
	for range k {
		d.Add(ranks.Rank(rng.IntN(n)))
	}
	return d
}

func TestBinaryMatchesPaperFormula(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		n := 1 + rng.IntN(70)
		tr := Binary(n)
		dead := randomDead(rng, n)
		for p := range ranks.Rank(n) {
			if dead.Has(p) {
				continue
			}
			gp, gok := tr.Parent(p, &dead)
			wp, wok := paperParent(p, &dead)
			if gp != wp || gok != wok {
				t.Fatalf("n=%d dead=%v: Parent(%d) = %d,%v; paper %d,%v", n, dead, p, gp, gok, wp, wok)
			}
		}
	}
}

// randomTree returns a random flat or hierarchical tree over a random
// member set within 0..n-1.
func randomTree(rng *rand.Rand, n int) (*HeapTree, []ranks.Rank) {
	shapes := []Shape{BinaryShape, StarShape, StringShape, KAryShape(3), KAryShape(5)}
	members := All(n)
	if rng.IntN(3) == 0 {
		members = nil
		for r := range n {
			if rng.IntN(4) != 0 {
				members = append(members, ranks.Rank(r))
			}
		}
	}
	if rng.IntN(2) == 0 {
		nodeOf := make([]int, n)
		ppn := 1 + rng.IntN(6)
		for r := range nodeOf {
			nodeOf[r] = rng.IntN(n/ppn + 1)
		}
		return NewHierarchical(shapes[rng.IntN(len(shapes))], shapes[rng.IntN(len(shapes))], nodeOf, members), members
	}
	return NewFlat(shapes[rng.IntN(len(shapes))], members), members
}

// TestChildrenIsInverseOfParent checks Children(S, p) = {q | Parent(S, q) =
// p}, a single root, and that every alive member reaches the root, on
// random trees and dead sets.
func TestChildrenIsInverseOfParent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 600 {
		n := 1 + rng.IntN(60)
		tr, members := randomTree(rng, n)
		dead := randomDead(rng, n)
		var alive []ranks.Rank
		for _, r := range members {
			if !dead.Has(r) {
				alive = append(alive, r)
			}
		}
		if len(alive) == 0 {
			continue
		}
		kids := map[ranks.Rank][]ranks.Rank{}
		roots := 0
		for _, q := range alive {
			p, ok := tr.Parent(q, &dead)
			if !ok {
				roots++
				if q != minLabel(tr, alive) {
					t.Fatalf("%v dead=%v: root %d is not the alive member of least label", tr, dead, q)
				}
				continue
			}
			if dead.Has(p) || !tr.Contains(p) {
				t.Fatalf("%v dead=%v: Parent(%d) = %d is dead or not a member", tr, dead, q, p)
			}
			kids[p] = append(kids[p], q)
		}
		if roots != 1 {
			t.Fatalf("%v dead=%v: %d roots", tr, dead, roots)
		}
		for _, p := range alive {
			if got, want := sorted(tr.Children(p, &dead)), sorted(kids[p]); !slices.Equal(got, want) {
				t.Fatalf("%v dead=%v: Children(%d) = %v, want %v", tr, dead, p, got, want)
			}
		}
		// Every alive member reaches the root in fewer than n hops.
		for _, q := range alive {
			x, hops := q, 0
			for {
				p, ok := tr.Parent(x, &dead)
				if !ok {
					break
				}
				x, hops = p, hops+1
				if hops > n {
					t.Fatalf("%v dead=%v: cycle from %d", tr, dead, q)
				}
			}
		}
	}
}

func minLabel(tr *HeapTree, rs []ranks.Rank) ranks.Rank {
	best, bl := rs[0], tr.m
	for _, r := range rs {
		if l, _ := tr.label(r); l < bl {
			best, bl = r, l
		}
	}
	return best
}

// TestHierarchical checks the bin/star and bin/bin X/Y trees of Section 4
// and their mending when a leader or a whole node dies.
func TestHierarchical(t *testing.T) {
	nodeOf := []int{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}
	binStar := NewHierarchical(BinaryShape, StarShape, nodeOf, All(12))
	binBin := NewHierarchical(BinaryShape, BinaryShape, nodeOf, All(12))
	cases := []treeCase{
		{name: "bin/star", tree: binStar,
			parent:   map[ranks.Rank]int{0: -1, 4: 0, 8: 0, 1: 0, 3: 0, 5: 4, 7: 4, 9: 8},
			children: map[ranks.Rank][]ranks.Rank{0: {4, 8, 1, 2, 3}, 4: {5, 6, 7}, 5: nil}},
		{name: "bin/bin", tree: binBin,
			parent:   map[ranks.Rank]int{0: -1, 4: 0, 8: 0, 1: 0, 2: 0, 3: 1, 5: 4, 6: 4, 7: 5},
			children: map[ranks.Rank][]ranks.Rank{0: {4, 8, 1, 2}, 1: {3}, 4: {5, 6}, 5: {7}}},
		{name: "bin/bin, leader 4 dead: its node climbs to leader 0", tree: binBin, dead: []ranks.Rank{4},
			parent:   map[ranks.Rank]int{5: 0, 6: 0, 7: 5},
			children: map[ranks.Rank][]ranks.Rank{0: {8, 1, 2, 5, 6}}},
		{name: "bin/star, node 1 dead", tree: binStar, dead: []ranks.Rank{4, 5, 6, 7},
			parent:   map[ranks.Rank]int{8: 0, 9: 8},
			children: map[ranks.Rank][]ranks.Rank{0: {8, 1, 2, 3}}},
		{name: "bin/star, node 0 dead: leader 4 is root", tree: binStar, dead: []ranks.Rank{0, 1, 2, 3},
			parent:   map[ranks.Rank]int{4: -1, 8: 4, 5: 4},
			children: map[ranks.Rank][]ranks.Rank{4: {5, 6, 7, 8}}},
	}
	for _, tc := range cases {
		tc.check(t)
	}
	// Round-robin placement: node of r is r % 3; leaders 0, 1, 2.
	rr := NewHierarchical(BinaryShape, StarShape, []int{0, 1, 2, 0, 1, 2, 0, 1, 2}, All(9))
	treeCase{name: "bin/star round robin", tree: rr,
		parent:   map[ranks.Rank]int{0: -1, 1: 0, 2: 0, 3: 0, 6: 0, 4: 1, 7: 1, 5: 2, 8: 2},
		children: map[ranks.Rank][]ranks.Rank{1: {4, 7}}}.check(t)
}

// TestRebalance checks the tree rebalancing of Section 4: after failures
// the tree over the survivors is a fresh balanced tree.
func TestRebalance(t *testing.T) {
	dead := ranks.Of(0, 1, 2, 5, 9)
	surv := Survivors(16, dead)
	if want := []ranks.Rank{3, 4, 6, 7, 8, 10, 11, 12, 13, 14, 15}; !slices.Equal(surv, want) {
		t.Fatalf("Survivors = %v, want %v", surv, want)
	}
	tr := Binary(16).Over(surv)
	if tr.Len() != 11 || tr.Root() != 3 || tr.Contains(5) || !tr.Contains(15) {
		t.Fatalf("rebalanced tree %v: root %d", tr, tr.Root())
	}
	treeCase{name: "rebalanced binary", tree: tr,
		parent:   map[ranks.Rank]int{3: -1, 4: 3, 6: 3, 7: 4, 8: 4, 10: 6, 11: 6, 12: 7},
		children: map[ranks.Rank][]ranks.Rank{3: {4, 6}, 4: {7, 8}, 5: nil}}.check(t)
	// Depth of the mended tree vs the rebalanced one after many failures.
	n := 256
	var d ranks.Set
	for r := range n {
		if r%4 != 3 {
			d.Add(ranks.Rank(r))
		}
	}
	depth := func(tr Tree, dead *ranks.Set, r ranks.Rank) int {
		h := 0
		for {
			p, ok := tr.Parent(r, dead)
			if !ok {
				return h
			}
			r, h = p, h+1
		}
	}
	if got := len(Binary(n).Children(3, &d)); got < 16 {
		t.Fatalf("the mended tree should have degenerated to a wide root, has %d children", got)
	}
	rb := Binary(n).Over(Survivors(n, d))
	for _, r := range Survivors(n, d) {
		if h := depth(rb, &ranks.Set{}, r); h > 6 {
			t.Fatalf("rebalanced depth of %d is %d", r, h)
		}
	}
	h := NewHierarchical(BinaryShape, StarShape, []int{0, 0, 1, 1, 2, 2}, All(6)).Over([]ranks.Rank{1, 2, 3, 5})
	treeCase{name: "rebalanced bin/star", tree: h,
		parent: map[ranks.Rank]int{1: -1, 2: 1, 5: 1, 3: 2}}.check(t)
}
