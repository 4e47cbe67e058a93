package ranks

import (
	"math/rand/v2"
	"slices"
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

// AddRanks and AddAll, one merge each, leave the set and return the new
// ranks exactly as Add one rank at a time does.
func TestAddRanksMatchesAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	for range 500 {
		var s, want Set
		for range rng.IntN(40) {
			r := Rank(rng.IntN(64))
			s.Add(r)
			want.Add(r)
		}
		batch := make([]Rank, rng.IntN(40))
		for i := range batch {
			batch[i] = Rank(rng.IntN(64))
		}
		o := s.Clone()
		var wantNew []Rank
		for _, r := range batch {
			if want.Add(r) {
				wantNew = append(wantNew, r)
			}
		}
		if got := s.AddRanks(batch); !slices.Equal(got, wantNew) || !s.Equal(want) {
			t.Fatalf("AddRanks(%v) on %v: %v, set %v; want %v, set %v", batch, o, got, s, wantNew, want)
		}
		b := Of(batch...)
		wantAll := slices.DeleteFunc(slices.Clone(b.Members()), o.Has)
		if got := o.AddAll(b); !slices.Equal(got, wantAll) || !o.Equal(want) {
			t.Fatalf("AddAll(%v): %v, set %v; want %v, set %v", b, got, o, wantAll, want)
		}
	}
}
