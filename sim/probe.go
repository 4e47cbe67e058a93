package sim

import (
	"math"
)

// ProbeRun is one run of the probing part of a SWIM-like randomized
// detector (seed 000 §3.4 and §4.3): in every round each of the N processes
// picks one other process uniformly at random and pings it.
type ProbeRun struct {
	// Rounds is the number of rounds until every process has been pinged
	// at least once.
	Rounds int
	// L is the largest number of pings one process received in the first
	// round (the paper's L(N)), and LMax the largest over all Rounds
	// rounds.
	L, LMax int
}

// Prober simulates probing rounds over N processes; it keeps its buffers
// between runs.
type Prober struct {
	n      int
	load   []int32
	probed []bool
}

// NewProber returns a prober for n ≥ 2 processes.
func NewProber(n int) *Prober {
	return &Prober{n: n, load: make([]int32, n), probed: make([]bool, n)}
}

// Run draws one run with the randomness of seed.
func (p *Prober) Run(seed uint64) ProbeRun {
	r := newRand(seed, streamProbe)
	n := p.n
	clear(p.probed)
	left := n
	var out ProbeRun
	for left > 0 {
		clear(p.load)
		for x := range n {
			y := r.IntN(n - 1)
			if y >= x { // uniform over the others
				y++
			}
			p.load[y]++
			if !p.probed[y] {
				p.probed[y] = true
				left--
			}
		}
		l := 0
		for _, v := range p.load {
			l = max(l, int(v))
		}
		if out.Rounds == 0 {
			out.L = l
		}
		out.LMax = max(out.LMax, l)
		out.Rounds++
	}
	return out
}

// ProbeMissProb is seed 000 §3.4.2's p(N): the probability that a given
// process is not pinged in one round, (1 − 1/(N−1))^(N−1) when each process
// pings one of the N−1 others (≈ 1/e).
func ProbeMissProb(n int) float64 {
	return math.Exp(float64(n-1) * math.Log1p(-1/float64(n-1)))
}

// ProbeRoundsFor returns seed 000's number of rounds x after which a given
// process has been pinged with probability at least 1 − risk:
// ⌈log(risk)/log p(N)⌉ (21 for N = 100,000 and risk 10⁻⁹), and the number
// after which all N have, by the union bound: ⌈log(risk/N)/log p(N)⌉.
func ProbeRoundsFor(n int, risk float64) (one, all int) {
	lp := math.Log(ProbeMissProb(n))
	return int(math.Ceil(math.Log(risk) / lp)), int(math.Ceil(math.Log(risk/float64(n)) / lp))
}

// BallsBinsBounds returns the bounds ln N / ln ln N and 3 ln N / ln ln N
// between which L(N) lies with high probability (seed 000 §3.4.2, after
// Mitzenmacher and Upfal).
func BallsBinsBounds(n int) (lo, hi float64) {
	l := math.Log(float64(n))
	lo = l / math.Log(l)
	return lo, 3 * lo
}

// ProbeStats aggregates runs at one N.
type ProbeStats struct {
	N, Runs              int
	MeanRounds           float64
	MaxRounds            int
	MeanL                float64
	MaxL                 int
	RoundsOne, RoundsAll int     // ProbeRoundsFor(N, 1e-9)
	BoundLo, BoundHi     float64 // BallsBinsBounds(N)
}

// ProbeStudy runs runs probing runs at n (run i seeded RunSeed(seed, i)),
// on workers goroutines, calling progress after each run.
func ProbeStudy(n, runs, workers int, seed uint64, progress func()) ProbeStats {
	res := make([]ProbeRun, runs)
	pool := make(chan *Prober, workers)
	for range workers {
		pool <- NewProber(n)
	}
	Parallel(runs, workers, func(i int) {
		p := <-pool
		res[i] = p.Run(RunSeed(seed, i))
		pool <- p
		if progress != nil {
			progress()
		}
	})
	st := ProbeStats{N: n, Runs: runs}
	for _, r := range res {
		st.MeanRounds += float64(r.Rounds)
		st.MaxRounds = max(st.MaxRounds, r.Rounds)
		st.MeanL += float64(r.L)
		st.MaxL = max(st.MaxL, r.L)
	}
	st.MeanRounds /= float64(runs)
	st.MeanL /= float64(runs)
	st.RoundsOne, st.RoundsAll = ProbeRoundsFor(n, 1e-9)
	st.BoundLo, st.BoundHi = BallsBinsBounds(n)
	return st
}
