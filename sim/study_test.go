package sim

import (
	"math"
	"testing"

	"github.com/vigil-hpc/vigil/era"
)

// TestGreedyTree: the greedy LogP tree reaches I(s) = I(s−1) + I(s−ℓ−2)
// nodes, is a spanning tree for any placement, and bit-reversal placement
// is a permutation.
func TestGreedyTree(t *testing.T) {
	for _, m := range []int{1, 2, 3, 7, 100, 1000, 4096, 5000} {
		p := BitReversePlace(m)
		seen := make([]bool, m)
		for l := range m {
			x := p(l)
			if x < 0 || x >= m || seen[x] {
				t.Fatalf("m=%d: BitReversePlace(%d) = %d is not a permutation", m, l, x)
			}
			seen[x] = true
		}
		for _, pl := range []func(int) int{nil, p} {
			tr := GreedyTree(m, 2, pl)
			if tr.Edges() != m-1 {
				t.Fatalf("m=%d: %d edges", m, tr.Edges())
			}
			got := make([]bool, m)
			got[0] = true
			q := []uint32{0}
			for len(q) > 0 {
				x := q[0]
				q = q[1:]
				for _, y := range tr.to[tr.off[x]:tr.off[x+1]] {
					if got[y] {
						t.Fatalf("m=%d: %d reached twice", m, y)
					}
					got[y] = true
					q = append(q, y)
				}
			}
			for x, g := range got {
				if !g {
					t.Fatalf("m=%d: %d unreached", m, x)
				}
			}
		}
	}
	// I(s) for ℓ = 2: the number reached by time s (deliveries at s+ℓ+1).
	I := []int{1, 1, 1, 1}
	for len(I) < 40 {
		s := len(I)
		I = append(I, I[s-1]+I[s-4])
	}
	for _, m := range []int{64, 1000, 4096} {
		span := 0
		for I[span] < m {
			span++
		}
		// The last node is reached at span; its parent sent at span−ℓ−1.
		if got := TreeSpan(GreedyTree(m, 2, nil), 2); got != span-2 {
			t.Errorf("m=%d: TreeSpan %d, want %d", m, got, span-2)
		}
	}
}

// TestCorrectedTreeConsistent: the corrected trees keep FCG's guarantee
// (consistent with one crash during the correction and dead nodes from the
// start), and without failures the tree alone reaches every node.
func TestCorrectedTreeConsistent(t *testing.T) {
	const n = 512
	for _, alg := range []string{"CTF", "CBF"} {
		for _, sc := range []BcastScenario{{Name: "none"}, {Name: "pre", Pre: 9}, {Name: "online", Pre: 2, Online: 1}} {
			st, err := BcastStudy(alg, n, sc, 300, 2, 7, nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.Inconsistent != 0 {
				t.Fatalf("%s %s: %d inconsistent runs", alg, sc.Name, st.Inconsistent)
			}
			if sc.Name == "none" && st.Latency > float64(st.T+2*n) {
				t.Fatalf("%s: latency %v", alg, st.Latency)
			}
		}
	}
	// Without the correction (GOS over the tree), a dead node's subtree is
	// lost: the correction is what makes it consistent.
	tr := GreedyTree(n, 2, nil)
	g, err := NewGossipSim(GossipConfig{Alg: GOS, N: n, T: TreeSpan(tr, 2), Ell: 2, Tree: tr})
	if err != nil {
		t.Fatal(err)
	}
	d := alive32(n)
	d[1] = 0
	if r := g.Run(d, nil); r.Consistent() || r.GNodes >= n-1 {
		t.Fatalf("tree without correction and a dead child of the root: %+v", r)
	}
	d[1] = never
	if r := g.Run(d, nil); !r.Consistent() || int(r.Msgs) != n-1 {
		t.Fatalf("tree without failures: %+v", r)
	}
}

// TestProbe: deterministic by seed, and seed 000's analytical numbers.
func TestProbe(t *testing.T) {
	p := NewProber(1000)
	if a, b := p.Run(3), p.Run(3); a != b {
		t.Fatalf("same seed, %+v vs %+v", a, b)
	}
	if one, _ := ProbeRoundsFor(100000, 1e-9); one != 21 {
		t.Fatalf("rounds for N = 100,000: %d, seed 000 says 21", one)
	}
	lo, hi := BallsBinsBounds(100000)
	if math.Abs(lo-4.7) > 0.05 || math.Abs(hi-14.1) > 0.1 {
		t.Fatalf("bounds %v %v, seed 000 says 4.7 and 14.1", lo, hi)
	}
	st := ProbeStudy(1000, 200, 2, 1, nil)
	if st.MeanL < st.BoundLo || st.MeanL > st.BoundHi || st.MeanRounds < 5 || st.MeanRounds > 20 {
		t.Fatalf("%+v", st)
	}
}

// TestERASim: the ERA driver over the real core decides in 2 × depth
// parallel steps without failures, and every process decides with crashes.
func TestERASim(t *testing.T) {
	for _, n := range []int{2, 5, 64, 300} {
		for _, name := range []string{"bin", "4ary", "star", "bin/bin", "bin/star"} {
			tr, deg, err := ERATree(name, n)
			if err != nil {
				t.Fatal(err)
			}
			r, err := SimulateERA(ERAConfig{N: n, Tree: tr, Net: Steps{}}, 1)
			if err != nil {
				t.Fatal(err)
			}
			if r.Undecided != 0 || !r.Agree || r.Msgs != uint64(2*(n-1)) {
				t.Fatalf("%s n=%d: %+v", name, n, r)
			}
			if name != "bin/bin" && name != "bin/star" && r.Decided != int64(ERABound(n, deg)) {
				t.Fatalf("%s n=%d: %d steps, want %d", name, n, r.Decided, ERABound(n, deg))
			}
			if r.Decided != int64(2*TreeDepth(tr, n)) {
				t.Fatalf("%s n=%d: %d steps, want 2 × depth = %d", name, n, r.Decided, 2*TreeDepth(tr, n))
			}
			for seed := range uint64(20) {
				f, err := SimulateERA(ERAConfig{N: n, Tree: tr, Net: LogP{L: 2, O: 1, G: 1}, Failures: min(3, n-1),
					Window: 30, Detect: 5}, seed)
				if err != nil {
					t.Fatal(err)
				}
				if f.Undecided != 0 || !f.Agree {
					t.Fatalf("%s n=%d seed %d with failures: %+v", name, n, seed, f)
				}
			}
		}
	}
	if _, err := SimulateERA(ERAConfig{N: 4, Tree: era.Binary(4), Net: Steps{}, Failures: 4}, 1); err == nil {
		t.Fatal("all processes failing: no error")
	}
}
