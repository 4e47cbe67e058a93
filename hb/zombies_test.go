package hb

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

func TestZombiesSawWordsOnly(t *testing.T) {
	z := NewZombies(0)
	if z.Saw([]ranks.Rank{1}, []uint64{7}) != nil || z.Held(1) {
		t.Fatal("an empty tracker reports a zombie")
	}
	z.Hold(1)
	z.Hold(2)
	z.Hold(2)
	if !z.Held(1) || !z.Held(2) || z.Held(3) || z.Len() != 2 {
		t.Fatal("Held does not match Hold")
	}
	if f := z.Fresh(); !slices.Equal(f, []ranks.Rank{1, 2}) {
		t.Fatalf("Fresh = %v, want [1 2]", f)
	}
	// The first words seen are where growth counts from.
	if m := z.Saw([]ranks.Rank{1, 2}, []uint64{7, 3}); m != nil {
		t.Fatalf("first words reported as growth: %v", m)
	}
	if z.Fresh() != nil || !slices.Equal(z.Ranks(), []ranks.Rank{1, 2}) {
		t.Fatalf("after the first words: fresh %v, ranks %v", z.Fresh(), z.Ranks())
	}
	if m := z.Saw([]ranks.Rank{1, 2}, []uint64{7, 3}); m != nil {
		t.Fatalf("no word moved, Saw = %v", m)
	}
	// Rank 3 is not held dead: never a zombie.
	if m := z.Saw([]ranks.Rank{1, 2, 3}, []uint64{7, 4, 9}); !slices.Equal(m, []ranks.Rank{2}) {
		t.Fatalf("Saw = %v, want [2]", m)
	}
	if m := z.Saw([]ranks.Rank{1, 2}, []uint64{7, 4}); m != nil {
		t.Fatalf("the same word reported twice: %v", m)
	}
}

func TestZombiesDueRateLimits(t *testing.T) {
	z := NewZombies(0)
	const ms = int64(1e6)
	if !z.Due(5, 1000*ms) {
		t.Fatal("first notice not due")
	}
	if z.Due(5, 1000*ms+int64(EvictInterval)-1) {
		t.Fatal("second notice due within EvictInterval")
	}
	if !z.Due(6, 1000*ms) {
		t.Fatal("the limit must be per rank")
	}
	if !z.Due(5, 1000*ms+int64(EvictInterval)) {
		t.Fatal("notice not due after EvictInterval")
	}
}

// Fresh keeps the order the ranks were held in, less those whose word
// was seen, however Saw and Hold interleave.
func TestZombiesFreshOrder(t *testing.T) {
	for _, n := range []int{0, 5, 200} { // job size unknown, known (the bitset in one allocation)
		z := NewZombies(n)
		for _, r := range []ranks.Rank{3, 1, 2} {
			z.Hold(r)
		}
		z.Saw([]ranks.Rank{1}, []uint64{5})
		z.Hold(1)
		z.Hold(4)
		if f := z.Fresh(); !slices.Equal(f, []ranks.Rank{3, 2, 4}) || z.Len() != 4 {
			t.Fatalf("n = %d: Fresh = %v (Len %d), want [3 2 4] (4)", n, f, z.Len())
		}
		z.Saw([]ranks.Rank{3, 2, 4}, []uint64{1, 1, 1})
		z.Hold(0)
		z.Hold(130)
		if f := z.Fresh(); !slices.Equal(f, []ranks.Rank{0, 130}) || !slices.Equal(z.Ranks(), []ranks.Rank{0, 1, 2, 3, 4, 130}) {
			t.Fatalf("n = %d: Fresh = %v, Ranks = %v; want [0 130], [0 1 2 3 4 130]", n, f, z.Ranks())
		}
	}
}

// Past smallFresh fresh ranks (the bitset), Hold, Held, Saw and Fresh
// keep the same answers.
func TestZombiesManyFresh(t *testing.T) {
	for _, n := range []int{0, 1000} {
		z := NewZombies(n)
		rng := rand.New(rand.NewPCG(29, 3))
		perm := rng.Perm(1000)
		var want []ranks.Rank // fresh, in the order held
		for i, p := range perm[:300] {
			r := ranks.Rank(p)
			z.Hold(r)
			z.Hold(r)
			want = append(want, r)
			if i%3 == 2 { // the word of the rank held two before is seen
				seen := want[len(want)-3]
				z.Saw([]ranks.Rank{seen}, []uint64{1})
				want = slices.DeleteFunc(want, func(x ranks.Rank) bool { return x == seen })
			}
		}
		if f := z.Fresh(); !slices.Equal(f, want) || z.Len() != 300 {
			t.Fatalf("n = %d: Fresh = %v (Len %d), want %v (300)", n, f, z.Len(), want)
		}
		for _, p := range perm {
			if held := z.Held(ranks.Rank(p)); held != slices.Contains(perm[:300], p) {
				t.Fatalf("n = %d: Held(%d) = %v", n, p, held)
			}
		}
		held := slices.Sorted(slices.Values(perm[:300]))
		if got := z.Ranks(); !slices.Equal(got, toRanks(held)) {
			t.Fatalf("n = %d: Ranks = %v, want %v", n, got, held)
		}
		words := make([]uint64, len(want))
		if m := z.Saw(want, words); m != nil || z.Fresh() != nil || !slices.Equal(z.Ranks(), toRanks(held)) {
			t.Fatalf("n = %d: after every first word: moved %v, fresh %v, ranks %v", n, m, z.Fresh(), z.Ranks())
		}
		z.Hold(ranks.Rank(perm[300]))
		held = slices.Sorted(slices.Values(perm[:301]))
		if got := z.Ranks(); !slices.Equal(got, toRanks(held)) {
			t.Fatalf("n = %d: after one more Hold, Ranks = %v, want %v", n, got, held)
		}
	}
}

func toRanks(xs []int) []ranks.Rank {
	rs := make([]ranks.Rank, len(xs))
	for i, x := range xs {
		rs[i] = ranks.Rank(x)
	}
	return rs
}
