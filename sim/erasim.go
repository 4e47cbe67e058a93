package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/ranks"
)

// Steps is the network of seed 001's complexity analysis (Theorem 5): every
// message takes exactly one parallel step and a node sends to all its
// children in the same step. It implements Network.
type Steps struct{}

// String implements Network.
func (Steps) String() string { return "parallel-steps" }

// Bound implements Network.
func (Steps) Bound() int64 { return 1 }

// NewPorts implements Network.
func (Steps) NewPorts(int, *rand.Rand) Ports { return stepPorts{} }

type stepPorts struct{}

func (stepPorts) Transfer(now int64, _, _ uint32, _ bool) (int64, int64) { return now, now + 1 }

// ERAConfig describes one agreement among N processes, each an unmodified
// era.Core, over Net (Steps counts parallel steps; LogP gives latencies).
type ERAConfig struct {
	N    int
	Tree era.Tree
	Net  Network
	// Failures processes (drawn uniformly, the root included) crash at
	// times uniform in [0, Window); every survivor's perfect detector
	// reports each crash Detect after it (ERA Part 4).
	Failures       int
	Window, Detect int64
}

// ERAResult is one agreement's outcome.
type ERAResult struct {
	// Decided is when the last alive process decided, FirstDecided when the
	// first did.
	Decided, FirstDecided int64
	// Msgs counts messages sent.
	Msgs uint64
	// Undecided counts alive processes that never decided (must be 0).
	Undecided int
	// Agree reports that every decider decided the same value.
	Agree bool
}

// event kinds of the ERA simulation, in their order at equal times
const (
	evEraCrash uint8 = iota
	evEraMsg
	evEraDetect
)

// SimulateERA runs one agreement (BitAND over one-byte contributions) with
// the randomness of seed.
func SimulateERA(cfg ERAConfig, seed uint64) (ERAResult, error) {
	n := cfg.N
	if n < 2 || cfg.Tree == nil || cfg.Net == nil || cfg.Failures < 0 || cfg.Failures >= n || cfg.Detect < 0 {
		return ERAResult{}, fmt.Errorf("sim: bad ERAConfig (n=%d, tree %v, net %v, failures %d, detect %d)", n, cfg.Tree, cfg.Net, cfg.Failures, cfg.Detect)
	}
	fr := newRand(seed, streamFailures)
	death := make([]int64, n)
	for i := range death {
		death[i] = math.MaxInt64
	}
	var en Engine
	for _, v := range distinctRanks(n, cfg.Failures, fr) {
		at := int64(0)
		if cfg.Window > 0 {
			at = fr.Int64N(cfg.Window)
		}
		death[v] = at
		en.Schedule(Event{At: at, Kind: evEraCrash, Node: uint32(v)})
		en.Schedule(Event{At: at + cfg.Detect, Kind: evEraDetect, A: uint32(v)})
	}
	ports := cfg.Net.NewPorts(n, newRand(seed, streamNet))
	cores := make([]*era.Core, n)
	// Messages in flight, referenced by index from the events.
	var msgs []era.Msg
	res := ERAResult{Decided: -1, FirstDecided: -1, Agree: true}
	decided := make([]bool, n)
	var value []byte
	id := era.ID{Epoch: 1, Seq: 1}
	apply := func(p ranks.Rank, outs []era.Out, now int64) {
		for _, o := range outs {
			if o.Decided != nil {
				if decided[p] {
					continue
				}
				decided[p] = true
				if value == nil {
					value = o.Decided.Value
				} else if string(value) != string(o.Decided.Value) {
					res.Agree = false
				}
				if res.FirstDecided < 0 {
					res.FirstDecided = now
				}
				res.Decided = max(res.Decided, now)
				continue
			}
			alive := death[o.To] > now
			sent, at := ports.Transfer(now, uint32(p), uint32(o.To), alive)
			if sent > death[p] {
				return // crashed while sending: the rest is lost
			}
			res.Msgs++
			if alive {
				en.Schedule(Event{At: at, Kind: evEraMsg, Node: uint32(o.To), A: uint32(p), B: uint64(len(msgs))})
				msgs = append(msgs, o.Msg)
			}
		}
	}
	for p := range n {
		cores[p] = era.NewCore(ranks.Rank(p), n, cfg.Tree, era.BitAND)
	}
	for p := range n {
		if death[p] <= 0 {
			continue
		}
		outs, err := cores[p].Start(id, era.Contribution{Value: []byte{byte(1 + p%255)}})
		if err != nil {
			return res, err
		}
		apply(ranks.Rank(p), outs, 0)
	}
	for {
		e, ok := en.Next(math.MaxInt64 / 2)
		if !ok {
			break
		}
		switch e.Kind {
		case evEraMsg:
			if death[e.Node] <= e.At {
				continue
			}
			apply(ranks.Rank(e.Node), cores[e.Node].Step(ranks.Rank(e.A), msgs[e.B]), e.At)
		case evEraDetect:
			for p := range n {
				if death[p] > e.At {
					apply(ranks.Rank(p), cores[p].Dead(ranks.Rank(e.A)), e.At)
				}
			}
		}
	}
	for p := range n {
		if death[p] == math.MaxInt64 && !decided[p] {
			res.Undecided++
		}
	}
	return res, nil
}

// ERABound returns Theorem 5's failure-free bound 2⌈log_δ n⌉ parallel steps
// for a tree of maximal degree δ (the depth of a complete δ-ary tree).
func ERABound(n, degree int) int {
	if degree <= 1 {
		return 2 * (n - 1)
	}
	d, size, level := 0, 1, 1
	for size < n {
		level *= degree
		size += level
		d++
	}
	return 2 * d
}

// ERATree returns the tree called name over n ranks: "bin", "star",
// "4ary", "string", or the hierarchical "bin/bin" and "bin/star" of seed
// 001 §4 with 16 ranks per node, and its maximal number of children.
func ERATree(name string, n int) (era.Tree, int, error) {
	nodeOf := func() []int {
		s := make([]int, n)
		for r := range s {
			s[r] = r / 16
		}
		return s
	}
	switch name {
	case "bin":
		return era.Binary(n), 2, nil
	case "star":
		return era.Star(n), n - 1, nil
	case "4ary":
		return era.KAry(4, n), 4, nil
	case "string":
		return era.String(n), 1, nil
	case "bin/bin":
		return era.NewHierarchical(era.BinaryShape, era.BinaryShape, nodeOf(), era.All(n)), 3, nil
	case "bin/star":
		return era.NewHierarchical(era.BinaryShape, era.StarShape, nodeOf(), era.All(n)), min(n-1, 17), nil
	}
	return nil, 0, fmt.Errorf("sim: unknown ERA tree %q (want bin, star, 4ary, string, bin/bin or bin/star)", name)
}

// ERAStats aggregates agreements of one configuration. Times are in the
// network's unit (parallel steps, or µs for LogP).
type ERAStats struct {
	Tree                 string
	N, Failures, Runs    int
	Decided, DecidedMax  float64
	FirstDecided         float64
	Msgs                 float64
	Undecided, Disagreed int
}

// ERAStudy runs runs agreements of cfg (run i seeded RunSeed(seed, i)) on
// workers goroutines; unit divides the times (1 for Steps, 1000 for µs).
func ERAStudy(name string, cfg ERAConfig, runs, workers int, seed uint64, unit float64, progress func()) (ERAStats, error) {
	out := make([]ERAResult, runs)
	errs := make([]error, runs)
	Parallel(runs, workers, func(i int) {
		out[i], errs[i] = SimulateERA(cfg, RunSeed(seed, i))
		if progress != nil {
			progress()
		}
	})
	st := ERAStats{Tree: name, N: cfg.N, Failures: cfg.Failures, Runs: runs}
	for i, r := range out {
		if errs[i] != nil {
			return st, errs[i]
		}
		st.Decided += float64(r.Decided) / unit
		st.DecidedMax = max(st.DecidedMax, float64(r.Decided)/unit)
		st.FirstDecided += float64(r.FirstDecided) / unit
		st.Msgs += float64(r.Msgs)
		st.Undecided += r.Undecided
		if !r.Agree {
			st.Disagreed++
		}
	}
	k := float64(runs)
	st.Decided /= k
	st.FirstDecided /= k
	st.Msgs /= k
	return st, nil
}

// TreeDepth returns the height of t over ranks 0..n-1 without failures (the
// number of edges from the deepest rank to the root): ERA decides in
// 2 × TreeDepth parallel steps when nothing fails (one UP wave, one DOWN
// wave), which is Theorem 5's 2 log_δ n for a complete δ-ary tree.
func TreeDepth(t era.Tree, n int) int {
	depth := make([]int, n)
	for i := range depth {
		depth[i] = -1
	}
	var walk func(r ranks.Rank) int
	walk = func(r ranks.Rank) int {
		if depth[r] >= 0 {
			return depth[r]
		}
		p, ok := t.Parent(r, nil)
		d := 0
		if ok {
			d = 1 + walk(p)
		}
		depth[r] = d
		return d
	}
	h := 0
	for r := range n {
		h = max(h, walk(ranks.Rank(r)))
	}
	return h
}
