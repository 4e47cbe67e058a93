package bcast

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

// refHBA is HBA.Neighbors written from the definition over an explicit,
// sorted participant list A: it builds each cube's coordinate → label table
// and looks the neighbour coordinates up in it.
func refHBA(self, source ranks.Rank, A []ranks.Rank) []ranks.Rank {
	si, xi := slices.Index(A, source), slices.Index(A, self)
	if si < 0 || xi < 0 {
		return nil
	}
	m := len(A)
	k := floorLog2(m)
	label := func(i int) int { return ((i-si)%m + m) % m }
	at := func(l int) ranks.Rank { return A[(l+si)%m] }
	cube1 := make([]int, 1<<k) // coordinate → label
	cube2 := make([]int, 1<<k)
	for i := range A {
		l := label(i)
		if l < 1<<k {
			cube1[l] = l
		}
		if c := (m - l) % m; c < 1<<k {
			cube2[c] = l
		}
	}
	x := label(xi)
	var out []ranks.Rank
	for _, cube := range [][]int{cube1, cube2} {
		c := -1
		for cc, l := range cube {
			if l == x {
				c = cc
			}
		}
		if c < 0 {
			continue
		}
		for j := 0; j < k; j++ {
			if r := at(cube[c^(1<<j)]); !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// refBMG is BMG.Neighbors from the definition over an explicit A.
func refBMG(self, source ranks.Rank, A []ranks.Rank) []ranks.Rank {
	si, xi := slices.Index(A, source), slices.Index(A, self)
	if si < 0 || xi < 0 {
		return nil
	}
	m := len(A)
	x := ((xi-si)%m + m) % m
	at := func(l int) ranks.Rank { return A[((l+si)%m+m)%m] }
	var out []ranks.Rank
	for p := 1; p < m; p *= 2 {
		if p > x && x+p < m {
			out = append(out, at(x+p))
		}
	}
	for p := 1; p < m; p *= 2 {
		for _, y := range []int{x + p, x - p} {
			if r := at(y); !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

func ref(o Overlay) func(self, source ranks.Rank, A []ranks.Rank) []ranks.Rank {
	if o.Name() == "hba" {
		return refHBA
	}
	return refBMG
}

func randomDead(rng *rand.Rand, n, maxDead int) ranks.Set {
	var D ranks.Set
	for i := rng.IntN(maxDead + 1); i > 0; i-- {
		D.Add(ranks.Rank(rng.IntN(n)))
	}
	return D
}

// TestNeighborsStructure checks, for small n and random D, every (self,
// source) pair: Neighbors equals the reference, holds only participants,
// never self, no duplicates; the relation is symmetric; every participant
// but the source appears in some list; and non-participants get nil.
func TestNeighborsStructure(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, o := range overlays {
		refN := ref(o)
		for n := 1; n <= 40; n++ {
			for trial := 0; trial < 4; trial++ {
				var D ranks.Set
				if trial > 0 {
					D = randomDead(rng, n, n/2)
				}
				A := participants(n, &D)
				for _, s := range A {
					nb := make(map[ranks.Rank][]ranks.Rank, len(A))
					covered := map[ranks.Rank]bool{}
					for _, x := range A {
						got := o.Neighbors(x, s, n, &D)
						if want := refN(x, s, A); !slices.Equal(got, want) {
							t.Fatalf("%s n=%d D=%v s=%d self=%d: %v, want %v", o.Name(), n, D, s, x, got, want)
						}
						seen := map[ranks.Rank]bool{}
						for _, y := range got {
							if y == x || seen[y] || y >= ranks.Rank(n) || D.Has(y) {
								t.Fatalf("%s n=%d D=%v s=%d self=%d: bad neighbour %d in %v", o.Name(), n, D, s, x, y, got)
							}
							seen[y] = true
							covered[y] = true
						}
						nb[x] = got
					}
					for x, ys := range nb {
						for _, y := range ys {
							if !slices.Contains(nb[y], x) {
								t.Fatalf("%s n=%d D=%v s=%d: %d→%d but not back", o.Name(), n, D, s, x, y)
							}
						}
					}
					for _, x := range A {
						if x != s && !covered[x] {
							t.Fatalf("%s n=%d D=%v s=%d: %d in no list", o.Name(), n, D, s, x)
						}
					}
				}
				for _, d := range D.Members() {
					if len(A) > 0 && (o.Neighbors(d, A[0], n, &D) != nil || o.Neighbors(A[0], d, n, &D) != nil) {
						t.Fatalf("%s: dead self or source %d got neighbours", o.Name(), d)
					}
				}
				if o.Neighbors(ranks.Rank(n), 0, n, &D) != nil {
					t.Fatalf("%s: self >= n got neighbours", o.Name())
				}
			}
		}
		// A nil D means no dead rank.
		if got, want := o.Neighbors(3, 1, 10, nil), o.Neighbors(3, 1, 10, &ranks.Set{}); !slices.Equal(got, want) {
			t.Fatalf("%s: nil D gives %v, empty D %v", o.Name(), got, want)
		}
	}
}

// TestNeighborsLarge compares with the reference at n = 256,000 with 10 dead.
func TestNeighborsLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	n := 256000
	D := randomDead(rng, n, 10)
	for D.Len() < 10 {
		D.Add(ranks.Rank(rng.IntN(n)))
	}
	A := participants(n, &D)
	for _, o := range overlays {
		refN := ref(o)
		for trial := 0; trial < 20; trial++ {
			s, x := A[rng.IntN(len(A))], A[rng.IntN(len(A))]
			if trial == 0 {
				x = s
			}
			got := o.Neighbors(x, s, n, &D)
			if want := refN(x, s, A); !slices.Equal(got, want) {
				t.Fatalf("%s s=%d self=%d: %v, want %v", o.Name(), s, x, got, want)
			}
		}
	}
}

// TestBMGMatchesSeedWithoutDead checks that, with D empty, BMG's neighbour
// set is seed 003's raw one, {i ± 2^j mod N}, and that the source sends to
// its binomial-tree children first.
func TestBMGMatchesSeedWithoutDead(t *testing.T) {
	for n := 1; n <= 40; n++ {
		for s := 0; s < n; s++ {
			for i := 0; i < n; i++ {
				var want []ranks.Rank
				for p := 1; p < n; p *= 2 {
					for _, y := range []int{(i + p) % n, ((i-p)%n + n) % n} {
						if !slices.Contains(want, ranks.Rank(y)) {
							want = append(want, ranks.Rank(y))
						}
					}
				}
				got := BMG{}.Neighbors(ranks.Rank(i), ranks.Rank(s), n, nil)
				slices.Sort(want)
				sorted := slices.Sorted(slices.Values(got))
				if !slices.Equal(sorted, want) {
					t.Fatalf("n=%d s=%d i=%d: %v, want set %v", n, s, i, got, want)
				}
			}
		}
	}
	// Figure 5 of seed 003: from source 0 among 12, the tree children of 0
	// are 1, 2, 4, 8, sent first; those of 1 are 3, 5, 9.
	if got := (BMG{}).Neighbors(0, 0, 12, nil); !slices.Equal(got[:4], []ranks.Rank{1, 2, 4, 8}) {
		t.Fatalf("order from 0: %v", got)
	}
	if got := (BMG{}).Neighbors(1, 0, 12, nil); !slices.Equal(got[:3], []ranks.Rank{3, 5, 9}) {
		t.Fatalf("order from 1: %v", got)
	}
}

// TestConnectivityWorstCase checks the tolerance claim at the graph level,
// exhaustively for m = 1..40 (1..32 under -race): for every set F of up to k−1 participants
// other than the source that fail before forwarding anything (the worst
// case: sending a prefix only adds messages), forward-once flooding from
// the source reaches every other participant. Labels are relative to the
// source, so n = m, D empty and source 0 cover every case.
func TestConnectivityWorstCase(t *testing.T) {
	maxM := 40
	if raceEnabled {
		maxM = 32
	}
	for _, o := range overlays {
		for m := 1; m <= maxM; m++ {
			k := floorLog2(m)
			adj := make([][]ranks.Rank, m)
			for x := range adj {
				adj[x] = o.Neighbors(ranks.Rank(x), 0, m, nil)
			}
			failed := make([]bool, m)
			reached := make([]bool, m)
			var stack []ranks.Rank
			subsets(allRanks(m)[1:], max(k-1, 0), func(F []ranks.Rank) {
				clear(failed)
				clear(reached)
				for _, f := range F {
					failed[f] = true
				}
				reached[0] = true
				stack = append(stack[:0], 0)
				for len(stack) > 0 {
					x := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					if failed[x] {
						continue
					}
					for _, y := range adj[x] {
						if !reached[y] {
							reached[y] = true
							stack = append(stack, y)
						}
					}
				}
				for x := range m {
					if !failed[x] && !reached[x] {
						t.Fatalf("%s m=%d F=%v: label %d unreached", o.Name(), m, F, x)
					}
				}
			})
		}
	}
}

// TestHBACubes checks the two cubes on an example: m = 6, k = 2, cube 1 =
// labels {0,1,2,3}, cube 2 = labels {0,5,4,3}.
func TestHBACubes(t *testing.T) {
	want := map[ranks.Rank][]ranks.Rank{
		0: {1, 2, 5, 4},
		1: {0, 3},
		2: {3, 0},
		3: {2, 1, 4, 5},
		4: {3, 0},
		5: {0, 3},
	}
	for x, w := range want {
		if got := (HBA{}).Neighbors(x, 0, 6, nil); !slices.Equal(got, w) {
			t.Errorf("label %d: %v, want %v", x, got, w)
		}
	}
	// Relabelled: source 7 among n = 9 with D = {1, 8}: A = 0,2,3,4,5,6,7,
	// labels from 7: 7→0, 0→1, 2→2, 3→3, 4→4, 5→5, 6→6 (m = 7, k = 2).
	D := ranks.Of(1, 8)
	if got := (HBA{}).Neighbors(7, 7, 9, &D); !slices.Equal(got, []ranks.Rank{0, 2, 6, 5}) {
		t.Errorf("relabelled source: %v", got)
	}
}

func benchNeighbors(b *testing.B, o Overlay) {
	for _, n := range []int{4096, 256000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, uint64(n)))
			var D ranks.Set
			for D.Len() < 10 {
				D.Add(ranks.Rank(rng.IntN(n)))
			}
			var selves []ranks.Rank
			for len(selves) < 1024 {
				if x := ranks.Rank(rng.IntN(n)); !D.Has(x) {
					selves = append(selves, x)
				}
			}
			source := selves[0]
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				_ = o.Neighbors(selves[i&1023], source, n, &D)
				i++
			}
		})
	}
}

func BenchmarkHBANeighbors(b *testing.B) { benchNeighbors(b, HBA{}) }
func BenchmarkBMGNeighbors(b *testing.B) { benchNeighbors(b, BMG{}) }
