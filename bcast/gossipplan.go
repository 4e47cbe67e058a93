package bcast

import (
	"math"
)

// DeltaConsistency is seed 002's δ = 1 − 0.5^(1/10^6) ≈ 6.93·10⁻⁷: the
// probability of missing a node that gives a 50% chance that 10^6 runs all
// reach every node. It is used to choose T for every corrected gossip.
const DeltaConsistency = 6.9314718e-7

// GossipModel holds seed 002's analytical model of the gossip phase for n
// active nodes out of N and a latency of Ell = L/o steps (time unit o).
type GossipModel struct {
	N, Nactive int
	Ell        int
}

// Colored returns c(t) of Lemma 1 for t = 0..steps: the expected number of
// g-nodes after t steps, c(t+1) = c(t) + (n − c(t))·[1 − (1 − 1/(N−1))^c(t−ℓ−1)],
// c(0) = 1 and c(t) = 0 for t < 0.
func (g GossipModel) Colored(steps int) []float64 {
	c := make([]float64, steps+1)
	c[0] = 1
	q := math.Log1p(-1 / float64(g.N-1))
	for t := 0; t < steps; t++ {
		var src float64
		if k := t - g.Ell - 1; k >= 0 {
			src = c[k]
		}
		c[t+1] = c[t] + (float64(g.Nactive)-c[t])*(-math.Expm1(src*q))
	}
	return c
}

// colorsAt returns c(T + ℓ + 1), the expected g-nodes when the correction
// starts after gossiping until T.
func (g GossipModel) colorsAt(T int) float64 {
	c := g.Colored(T + g.Ell + 1)
	return c[len(c)-1]
}

// ChainTail returns P(the longest chain of uncolored nodes between two
// g-nodes on the ring is longer than K) for c g-nodes, with seed 002's
// approximation: p(K) = c²(N − c)^K / N^(K+2) for a given start, α_K =
// 1 − (1 − p(K))^N, and independence between lengths (equation 2), so that
// P(max > K) = 1 − Π_{i>K} (1 − α_i).
func (g GossipModel) ChainTail(c float64, K int) float64 {
	N := float64(g.N)
	lc, lu := math.Log(c/N), math.Log((N-c)/N)
	var sum float64
	for i := K + 1; i <= g.N; i++ {
		p := math.Exp(2*lc + float64(i)*lu)
		if p < 1e-300 {
			break
		}
		sum += math.Log1p(-p)
	}
	return -math.Expm1(N * sum)
}

// ChainBound returns K̂: the smallest K with ChainTail(c, K) < delta.
func (g GossipModel) ChainBound(c, delta float64) int {
	N := float64(g.N)
	lc, lu := math.Log(c/N), math.Log((N-c)/N)
	terms := g.suffix(func(i int) float64 { return math.Log1p(-math.Exp(2*lc + float64(i)*lu)) }, 0)
	for K := 0; K < len(terms); K++ {
		if -math.Expm1(N*terms[K]) < delta {
			return K
		}
	}
	return g.N
}

// suffix returns s[K] = Σ_{i>K} term(i) for K from first, stopping where
// the terms vanish.
func (g GossipModel) suffix(term func(i int) float64, first int) []float64 {
	var ts []float64
	for i := first + 1; i <= g.N; i++ {
		v := term(i)
		ts = append(ts, v)
		if v > -1e-300 && i > first+8 {
			break
		}
	}
	s := make([]float64, len(ts)+1)
	for k := len(ts) - 1; k >= 0; k-- {
		s[k] = s[k+1] + ts[k]
	}
	return s // s[j] = Σ_{i > first+j} term(i)
}

// WindowBound returns Ĝ_V of seed 002 Appendix B: the smallest G such that,
// with c g-nodes, the probability that some run of consecutive nodes
// holding exactly V g-nodes (the first and the last among them) is longer
// than G is below delta. q(G,V) = c^V (N−c)^(G−V) (G−2)! / (N^G (V−2)! (G−V)!)
// and β_G = 1 − (1 − q(G,V))^N.
func (g GossipModel) WindowBound(c float64, V int, delta float64) int {
	N := float64(g.N)
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	lcN, luN, lv := math.Log(c/N), math.Log((N-c)/N), lg(V-2)
	terms := g.suffix(func(G int) float64 {
		if G < V {
			return 0
		}
		return math.Log1p(-math.Exp(float64(V)*lcN + float64(G-V)*luN + lg(G-2) - lv - lg(G-V)))
	}, V-1)
	for j := range terms {
		if -math.Expm1(N*terms[j]) < delta {
			return V - 1 + j
		}
	}
	return g.N
}

// GossipPlan is the parameter choice for one algorithm: T, and for OCG the
// number C of correction messages each g-node sends; Predicted is the
// equation's latency in steps.
type GossipPlan struct {
	T, C      int
	K         int
	Predicted int
}

// searchT minimises cost(T) over T in [1, maxT], taking the largest T among
// equal minima (seed 002: "select the T that can withstand the largest
// reduction in δ").
func searchT(maxT int, cost func(T int) (int, int)) (bestT, bestCost, bestK int) {
	bestCost = math.MaxInt
	for T := 1; T <= maxT; T++ {
		c, k := cost(T)
		if c <= bestCost {
			bestT, bestCost, bestK = T, c, k
		}
	}
	return
}

func (g GossipModel) maxT() int { return 8*int(math.Ceil(math.Log2(float64(g.N)))) + 4*g.Ell + 16 }

// PlanGOS picks the gossip-only T: the smallest T whose expected number of
// unreached nodes, n − c(T + ℓ + 1), is below delta (so that the
// probability of missing one is too), plus seed 002's one-step margin.
func (g GossipModel) PlanGOS(delta float64) GossipPlan {
	c := g.Colored(g.maxT() + g.Ell + 1)
	for T := 1; T <= g.maxT(); T++ {
		if float64(g.Nactive)-c[T+g.Ell+1] < delta {
			return GossipPlan{T: T + 1, Predicted: T + 1 + g.Ell + 1}
		}
	}
	return GossipPlan{T: g.maxT(), Predicted: g.maxT() + g.Ell + 1}
}

// PlanOCG is equation (3): T_OCG = argmin_T (T + 2L + (2 + K̂)O), with
// C = K̂ + 1 correction messages (Claim 2 plus the recommended extra o),
// and one more step of gossip as a margin.
func (g GossipModel) PlanOCG(delta float64) GossipPlan {
	T, cost, K := searchT(g.maxT(), func(T int) (int, int) {
		K := g.ChainBound(g.colorsAt(T), delta)
		return T + 2*g.Ell + 2 + K, K
	})
	return GossipPlan{T: T + 1, C: K + 1, K: K, Predicted: cost + 1}
}

// PlanCCG is equation (4): T_CCG = argmin_T (T + 2L + (2 + 2K̂)O), plus the
// one-step margin.
func (g GossipModel) PlanCCG(delta float64) GossipPlan {
	T, cost, K := searchT(g.maxT(), func(T int) (int, int) {
		K := g.ChainBound(g.colorsAt(T), delta)
		return T + 2*g.Ell + 2 + 2*K, K
	})
	return GossipPlan{T: T + 1, K: K, Predicted: cost + 1}
}

// PlanFCG is equation (5) of seed 002 Appendix B, T_FCG = argmin_T
// (T + 4Ĝ_V·O + L − 13O) with V = 2f + 3 g-nodes around each one (V = 5 for
// f = 1; the constant −13 is the appendix's, derived for f = 1), plus the
// one-step margin.
func (g GossipModel) PlanFCG(f int, delta float64) GossipPlan {
	V := 2*f + 3
	T, cost, K := searchT(g.maxT(), func(T int) (int, int) {
		G := g.WindowBound(g.colorsAt(T), V, delta)
		return T + 4*G + g.Ell - 13, G
	})
	return GossipPlan{T: T + 1, K: K, Predicted: cost + 1}
}
