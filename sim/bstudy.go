package sim

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/vigil-hpc/vigil/bcast"
)

// BcastAlgs lists the algorithms of the broadcast study (seed 002 §IV):
// OPT is the binomial tree (not fault-tolerant), GOS/OCG/CCG/FCG the gossip
// family, BIG the binomial graph, BFB Buntinas' broadcast (an analytical
// model, as in seed 002), HBA and BMG Vigil's overlays (seeds 000 and 003),
// and CTF and CBF the corrected trees of the beyond-the-papers study: the
// LogP-optimal (greedy) tree or the binomial tree, then FCG's correction.
// The gossips and the trees run the runtime's cores (GossipSim).
var BcastAlgs = []string{"OPT", "GOS", "OCG", "CCG", "FCG", "BIG", "BFB", "HBA", "BMG", "CTF", "CBF"}

// StudyLogP is seed 002's LogP setting, L = 2 µs, o = g = 1 µs, in units of
// 1 µs.
var StudyLogP = LogPUnits{L: 2, O: 1, G: 1}

// BcastScenario is a failure scenario of the broadcast study. The root
// (rank 0) never fails; the victims are distinct ranks drawn uniformly.
type BcastScenario struct {
	Name string
	// Pre ranks are dead from the start, unknown to the algorithm (seed
	// 002's "originally-inactive nodes").
	Pre int
	// Online ranks crash during the broadcast, each at a step uniform in
	// [1, W], W being the algorithm's failure-free latency.
	Online int
}

// ExpectedFailures is seed 002 §IV.C's expected number of failures of n
// nodes during a 12-hour run with a node MTBF of 18,304 hours (2.69 at
// 4,096).
func ExpectedFailures(n int) float64 { return float64(n) * 12 / 18304 }

// Scenarios of the study at n nodes: none; the expected failures (⌈f⌉ dead
// from the start, f = 3 at 4,096 as in seed 002 Figure 7); the same with
// one of them crashing during the broadcast (what FCG with f = 1 is built
// for); and seed 002 Figure 7b's N/64 failures.
func Scenarios(n int) []BcastScenario {
	f := int(math.Ceil(ExpectedFailures(n)))
	return []BcastScenario{
		{Name: "none"},
		{Name: "expected", Pre: f},
		{Name: "expected-online", Pre: max(f-1, 0), Online: 1},
		{Name: "n/64", Pre: n / 64},
	}
}

// BcastStats aggregates the runs of one algorithm in one scenario. Times
// are in µs (steps of o), work in messages.
type BcastStats struct {
	Alg      string
	N, Runs  int
	Scenario string
	// T and C are the parameters used (gossip rounds, OCG corrections).
	T, C int
	// Latency is when the last alive node was done (seed 002 §IV.A):
	// mean, median, 99th percentile and max over the runs. Delivery is the
	// mean last first-delivery.
	Latency, LatencyP50, LatencyP99, LatencyMax float64
	Delivery                                    float64
	// Work is the mean number of messages sent.
	Work float64
	// Inconsistency is the mean share of alive nodes not reached, and
	// Inconsistent the number of runs that missed some alive node.
	Inconsistency float64
	Inconsistent  int
	// SOS is the mean number of nodes in SOS mode (FCG, CTF, CBF).
	SOS float64
	// Model is set for results computed from a formula, not simulated.
	Model bool
}

// LatencyWork is the figure of merit of the beyond-the-papers study.
func (s *BcastStats) LatencyWork() float64 { return s.Latency * s.Work }

// one run's outcome in the study's common terms
type bOutcome struct {
	latency, delivery int32
	msgs              int64
	alive, reached    int32
	sos               int32
}

// bRunner is one algorithm prepared for one N, with per-worker state.
type bRunner struct {
	alg   string
	n     int
	T, C  int
	table *FloodTable
	gcfg  *bcast.GossipConfig
	model func(sc BcastScenario) BcastStats
}

func newRunner(alg string, n, pre, tOverride int) (*bRunner, error) {
	if n < 4 {
		return nil, fmt.Errorf("sim: broadcast study needs N ≥ 4, got %d", n)
	}
	u := StudyLogP
	ell := int(u.L / u.O)
	m := GossipModel{N: n, Nactive: n - pre, Ell: ell}
	r := &bRunner{alg: alg, n: n}
	// The cores in units of o, with T and C planned for the live ranks.
	gcfg := func(a GossipAlg, T, C int) {
		r.gcfg = &bcast.GossipConfig{Alg: a, Step: 1, Latency: int64(ell), T: max(T, 1), C: C, F: 1}
		r.T, r.C = r.gcfg.T, C
	}
	gc := func(a GossipAlg, p GossipPlan) { gcfg(a, p.T, p.C) }
	switch alg {
	case "OPT":
		r.table = NewFloodTable(Binomial{}, n)
	case "BIG":
		r.table = NewFloodTable(BIG{}, n)
	case "HBA":
		r.table = NewFloodTable(bcast.HBA{}, n)
	case "BMG":
		r.table = NewFloodTable(bcast.BMG{}, n)
	case "GOS":
		gc(GOS, m.PlanGOS(DeltaConsistency))
	case "OCG":
		gc(OCG, m.PlanOCG(DeltaConsistency))
	case "CCG":
		gc(CCG, m.PlanCCG(DeltaConsistency))
	case "FCG":
		gc(FCG, m.PlanFCG(1, DeltaConsistency))
	case "CTF":
		gcfg(FCG, bcast.NewGreedyTree(n, ell).Span(), 0)
		r.gcfg.Tree = true
	case "CBF":
		gcfg(FCG, bcast.NewBinomialTree(n, ell).Span(), 0)
		r.gcfg.Tree, r.gcfg.BinomialTree = true, true
	case "BFB":
		r.model = func(sc BcastScenario) BcastStats { return bfbModel(n, sc) }
	default:
		return nil, fmt.Errorf("sim: unknown broadcast algorithm %q (want one of %v)", alg, BcastAlgs)
	}
	if tOverride > 0 {
		if r.gcfg == nil {
			return nil, fmt.Errorf("sim: %s has no parameter T", alg)
		}
		r.gcfg.T, r.T = tOverride, tOverride
	}
	return r, nil
}

// bfbModel is seed 002's analytical model of BFB (§IV.B.2): a tree
// broadcast of (2o + L)⌈log2 N⌉ with an acknowledgement per node, restarted
// from the root after each failure noticed during the operation; seed 002
// assumes ⌈20%⌉ of the failures happen during the operation. A restart costs
// a NACK climbing to the root and a new broadcast: 2(2o + L)⌈log2 N⌉ more.
func bfbModel(n int, sc BcastScenario) BcastStats {
	u := StudyLogP
	depth := float64(bits.Len(uint(n-1))) * float64(2*u.O+u.L)
	restarts := float64(sc.Online) + math.Ceil(0.2*float64(sc.Pre))
	if sc.Online > 0 {
		restarts = math.Ceil(0.2 * float64(sc.Pre+sc.Online))
	}
	lat := depth * (1 + 2*restarts)
	work := float64(2*(n-1-sc.Pre)) * (1 + restarts)
	return BcastStats{Alg: "BFB", N: n, Scenario: sc.Name, Runs: 1, Latency: lat, LatencyP50: lat, LatencyP99: lat,
		LatencyMax: lat, Delivery: lat, Work: work, Model: true}
}

// run simulates one broadcast; w is the worker's scratch state.
func (r *bRunner) run(w any, death []int32, seed uint64) bOutcome {
	switch s := w.(type) {
	case *flooder:
		o := s.run(death)
		last := int32(0)
		for x := 1; x < r.n; x++ {
			if death[x] == never && s.arr[x] != never {
				last = max(last, s.arr[x])
			}
		}
		return bOutcome{latency: o.completion, delivery: last, msgs: o.msgs, alive: o.alive, reached: o.reached}
	case *GossipSim:
		res, err := s.Run(GossipRun{Death: death, Seed: seed})
		if err != nil {
			panic(err) // a core refused what the configuration built above asked
		}
		return bOutcome{latency: res.Latency, delivery: res.LastDelivery, msgs: res.Msgs, alive: res.Alive,
			reached: res.Reached, sos: res.SOS}
	}
	panic("sim: bad worker state")
}

func (r *bRunner) worker() any {
	if r.table != nil {
		return newFlooder(r.table, StudyLogP)
	}
	g, err := NewGossipSim(r.n, *r.gcfg)
	if err != nil {
		panic(err) // the configuration is built above
	}
	return g
}

// BcastStudy runs runs broadcasts of alg at n nodes in scenario sc (run i
// seeded RunSeed(seed, i)) on workers goroutines, calling progress after
// each run.
func BcastStudy(alg string, n int, sc BcastScenario, runs, workers int, seed uint64, progress func()) (BcastStats, error) {
	return BcastStudyT(alg, n, 0, sc, runs, workers, seed, progress)
}

// BcastStudyT is BcastStudy with T forced to T (0: chosen as BcastStudy
// does) for the gossip family and the corrected trees.
func BcastStudyT(alg string, n, T int, sc BcastScenario, runs, workers int, seed uint64, progress func()) (BcastStats, error) {
	if sc.Pre+sc.Online > n-1 || sc.Pre < 0 || sc.Online < 0 || runs < 1 {
		return BcastStats{}, fmt.Errorf("sim: bad scenario %+v for N = %d and %d runs", sc, n, runs)
	}
	r, err := newRunner(alg, n, sc.Pre, T)
	if err != nil {
		return BcastStats{}, err
	}
	if r.model != nil {
		if progress != nil {
			for range runs {
				progress()
			}
		}
		return r.model(sc), nil
	}
	// The failure-free latency bounds the online crash times.
	w0 := r.worker()
	ff := r.run(w0, alive32(n), seed)
	window := max(ff.latency, 1)
	pool := make(chan any, workers)
	pool <- w0
	for range workers - 1 {
		pool <- r.worker()
	}
	outs := make([]bOutcome, runs)
	Parallel(runs, workers, func(i int) {
		w := <-pool
		rs := RunSeed(seed, i)
		death := alive32(n)
		fr := newRand(rs, streamFailures)
		for k, v := range distinctRanks(n-1, sc.Pre+sc.Online, fr) {
			x := int(v) + 1 // never the root
			if k < sc.Pre {
				death[x] = 0
			} else {
				death[x] = 1 + fr.Int32N(window)
			}
		}
		outs[i] = r.run(w, death, rs)
		pool <- w
		if progress != nil {
			progress()
		}
	})
	st := BcastStats{Alg: alg, N: n, Runs: runs, Scenario: sc.Name, T: r.T, C: r.C}
	lats := make([]float64, runs)
	for i, o := range outs {
		lats[i] = float64(o.latency)
		st.Latency += float64(o.latency)
		st.Delivery += float64(o.delivery)
		st.Work += float64(o.msgs)
		st.SOS += float64(o.sos)
		if o.reached < o.alive {
			st.Inconsistent++
			st.Inconsistency += float64(o.alive-o.reached) / float64(o.alive)
		}
	}
	k := float64(runs)
	st.Latency /= k
	st.Delivery /= k
	st.Work /= k
	st.SOS /= k
	st.Inconsistency /= k
	slices.Sort(lats)
	st.LatencyP50 = lats[runs/2]
	st.LatencyP99 = lats[min(runs-1, runs*99/100)]
	st.LatencyMax = lats[runs-1]
	return st, nil
}

func alive32(n int) []int32 {
	d := make([]int32, n)
	for i := range d {
		d[i] = never
	}
	return d
}
