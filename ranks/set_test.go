package ranks

import (
	"math/rand/v2"
	"testing"
)

func TestSetBasics(t *testing.T) {
	s := Of(5, 1, 3, 3)
	if s.Len() != 3 || !s.Has(3) || s.Has(2) {
		t.Fatalf("bad set %v", s)
	}
	if s.Add(3) || !s.Add(2) {
		t.Fatal("Add result wrong")
	}
	if got := s.AddAll(Of(0, 2, 9)); len(got) != 2 || got[0] != 0 || got[1] != 9 {
		t.Fatalf("AddAll returned %v", got)
	}
	if _, err := FromSorted([]Rank{1, 1}); err == nil {
		t.Fatal("FromSorted accepted a duplicate")
	}
}

func TestAliveLabelRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(200)
		var s Set
		for i := 0; i < rng.IntN(n); i++ {
			s.Add(Rank(rng.IntN(n)))
		}
		idx := 0
		for r := 0; r < n; r++ {
			l, ok := s.AliveLabel(Rank(r), n)
			if s.Has(Rank(r)) {
				if ok {
					t.Fatalf("dead rank %d got a label", r)
				}
				continue
			}
			if !ok || l != idx {
				t.Fatalf("rank %d: label %d,%v want %d", r, l, ok, idx)
			}
			if back := s.AliveAt(idx, n); back != Rank(r) {
				t.Fatalf("AliveAt(%d)=%d want %d", idx, back, r)
			}
			idx++
		}
	}
}
