package sim

import (
	"math"
	"testing"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/era"
)

// TestTrees: the greedy LogP tree and the binomial tree the study runs
// (bcast) are spanning trees, each label reached once, and the greedy
// tree reaches I(s) = I(s−1) + I(s−ℓ−2) nodes: its span is the step after
// the last send.
func TestTrees(t *testing.T) {
	for _, m := range []int{1, 2, 3, 7, 100, 1000, 4096, 5000} {
		for name, children := range map[string]func(int) []int{
			"greedy":   bcast.NewGreedyTree(m, 2).Children,
			"binomial": bcast.NewBinomialTree(m, 2).Children,
		} {
			got := make([]bool, m)
			got[0] = true
			edges := 0
			q := []int{0}
			for len(q) > 0 {
				x := q[0]
				q = q[1:]
				for _, y := range children(x) {
					if got[y] {
						t.Fatalf("%s m=%d: %d reached twice", name, m, y)
					}
					got[y] = true
					edges++
					q = append(q, y)
				}
			}
			if edges != m-1 {
				t.Fatalf("%s m=%d: %d edges", name, m, edges)
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
		if got := bcast.NewGreedyTree(m, 2).Span(); got != span-2 {
			t.Errorf("m=%d: span %d, want %d", m, got, span-2)
		}
	}
	// The binomial tree's last send in LogP: the root's log2 m sends, and
	// so on down the chain of last children.
	if got := bcast.NewBinomialTree(4096, 2).Span(); got != 46 {
		t.Errorf("binomial m=4096: span %d, want 46 (CBF's T)", got)
	}
}

// TestCorrectedTreeConsistent: the corrected trees keep FCG's guarantee
// (consistent with one crash during the correction and dead nodes from the
// start), and without failures the tree alone reaches every node.
func TestCorrectedTreeConsistent(t *testing.T) {
	const n = 512
	for _, alg := range []string{"CTF", "CBF"} {
		for _, sc := range []BcastScenario{{Name: "none"}, {Name: "pre", Pre: 9}, {Name: "online", Pre: 2, Online: 1}} {
			st, err := BcastStudy(alg, n, sc, 100, 2, 7, nil)
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
	g, err := NewGossipSim(n, bcast.GossipConfig{Alg: GOS, Tree: true, Step: 1, Latency: 2})
	if err != nil {
		t.Fatal(err)
	}
	d := alive32(n)
	d[1] = 0
	if r, err := g.Run(GossipRun{Death: d}); err != nil || r.Consistent() || r.GNodes >= n-1 {
		t.Fatalf("tree without correction and a dead child of the root: %+v, %v", r, err)
	}
	if r, err := g.Run(GossipRun{}); err != nil || !r.Consistent() || int(r.Msgs) != n-1 {
		t.Fatalf("tree without failures: %+v, %v", r, err)
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
