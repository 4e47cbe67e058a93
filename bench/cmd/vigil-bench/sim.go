package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/vigil-hpc/vigil/sim"
)

// simOpts are the flags shared by the sim subcommands.
type simOpts struct {
	out     string
	quick   bool
	seed    uint64
	workers int
	runs    int // 0: the subcommand's default
	maxN    int
	minN    int
	labels  bool
	quiet   bool
	plans   string
	algs    string
	scaling bool
	heavy   bool
	fracs   string
	bursts  string
	recvO   time.Duration
	stderr  io.Writer
	stdout  io.Writer
}

const simUsage = `usage: vigil-bench sim <stab|probe|bcast|era|tsweep|hostcrash|burst|all> [flags]

  stab   detector stabilization time vs n (seed 000 §4.2): LOWNOISE and
         LOWLAT, maximal quasi-simultaneous failures and random failures
         with μ_ind = 1 year, t = 1 ms
  probe  SWIM-style random probing: rounds until all probed, L(N) (seed 000 §4.3)
  bcast  latency, work, consistency of OPT GOS OCG CCG FCG BIG BFB HBA BMG and
         the corrected trees CTF CBF at N = 4,096 (L = 2 µs, o = 1 µs), and
         their scaling with N (seed 002 §IV)
  era    ERA decision time vs n and tree shape (seed 001 Theorem 5)
  tsweep latency and work of OCG, CCG, FCG and CTF vs T at N = 4,096 (expected
         failures): how the equations' T compares with the best T
  hostcrash
         host crashes (issue #13): one or 4 hosts of 16 or 64 ranks crash at
         once at n = 4,096 and 65,536, LOWLAT and LOWNOISE; Algorithm 1's
         mending against block mending (W = 16, 64): time until every
         survivor knows every dead rank, messages, hb.BlockBound (-heavy:
         also Algorithm 1 for 4 hosts of 64 at 65,536)
  burst  correlated failures (issue #29): 1 %, 5 %, 10 %, 25 % of the ranks
         at once (-fractions), as random ranks, whole hosts of 32 (host
         labels) and a cut of that many ranks seen from each side, at
         n = 1,024 … 65,536, with the runtime's defaults (h = 10 ms,
         δ = 50 ms, checks every 10 ms, block mending W = 16 with early
         probes) on LogP with receive contention (o = -recv-o): lost vs
         killed, time until every survivor knows, messages per survivor
         (-heavy: also the fractions above 1 % at 65,536)
  all    all of the above

Each writes CSV files and PNG figures into -out (hostcrash and burst also
a markdown table, hostcrash.md and burst.md, printed unless -q).
`

// simMain is `vigil-bench sim`.
func simMain(args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(os.Stderr, simUsage)
		return errors.New("sim: missing subcommand")
	}
	sub := args[0]
	fs := flag.NewFlagSet("vigil-bench sim "+sub, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), simUsage, "\nflags:\n"); fs.PrintDefaults() }
	var o simOpts
	fs.StringVar(&o.out, "out", "sim-out", "directory for the CSV and PNG files")
	fs.BoolVar(&o.quick, "quick", false, "CI-size runs (small n, few runs)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the experiment (runs are seeded from it)")
	fs.IntVar(&o.workers, "workers", runtime.GOMAXPROCS(0), "parallel simulations")
	fs.IntVar(&o.runs, "runs", 0, "runs per point (0: the subcommand's default)")
	fs.IntVar(&o.maxN, "maxn", 0, "largest n of the sweeps (0: the subcommand's default)")
	fs.IntVar(&o.minN, "minn", 0, "smallest n of the sweeps (0: the subcommand's default)")
	fs.BoolVar(&o.labels, "labels-only", false, "hostcrash: only the rows with host labels (to run them at a size where the others are on record)")
	fs.BoolVar(&o.quiet, "q", false, "no progress bar")
	fs.StringVar(&o.algs, "algs", strings.Join(sim.BcastAlgs, ","), "bcast: algorithms to run")
	fs.BoolVar(&o.scaling, "scaling", true, "bcast: also run the scaling study")
	fs.StringVar(&o.plans, "plans", "max-burst,random-1y", "stab: failure plans to run (max-burst, random-1y)")
	fs.BoolVar(&o.heavy, "heavy", false, "hostcrash: also run Algorithm 1 with 4 hosts of 64 at n = 65,536 (256 broadcasts to 65,536 ranks a run: over 10 min each on 2 cores)")
	fs.StringVar(&o.fracs, "fractions", "0.01,0.05,0.1,0.25", "burst: fractions of the ranks taken out at once")
	fs.StringVar(&o.bursts, "bursts", strings.Join(burstKinds, ","), "burst: the bursts to run (random, hosts, majority: the larger side of a cut, minority: its smaller side)")
	fs.DurationVar(&o.recvO, "recv-o", 5*time.Microsecond, "burst: LogP o, the cost of sending or receiving one message (L = 2 µs, g = o)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sim %s: unexpected arguments %q", sub, fs.Args())
	}
	for _, a := range strings.Split(o.algs, ",") {
		if !slices.Contains(sim.BcastAlgs, a) {
			return fmt.Errorf("sim: unknown algorithm %q in -algs (want some of %v)", a, sim.BcastAlgs)
		}
	}
	for _, p := range strings.Split(o.plans, ",") {
		if p != "max-burst" && p != "random-1y" {
			return fmt.Errorf("sim: unknown failure plan %q in -plans (want max-burst, random-1y)", p)
		}
	}
	if o.workers < 1 || o.runs < 0 || o.maxN < 0 {
		return fmt.Errorf("sim: -workers must be ≥ 1, -runs and -maxn ≥ 0")
	}
	o.stderr, o.stdout = os.Stderr, os.Stdout
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	subs := map[string]func(*simOpts) error{"stab": simStab, "probe": simProbe, "bcast": simBcast, "era": simERA, "tsweep": simTSweep,
		"hostcrash": simHostCrash, "burst": simBurst}
	if sub == "all" {
		for _, s := range []string{"probe", "era", "tsweep", "bcast", "stab", "hostcrash", "burst"} {
			if err := subs[s](&o); err != nil {
				return err
			}
		}
		return nil
	}
	f, ok := subs[sub]
	if !ok {
		fmt.Fprint(os.Stderr, simUsage)
		return fmt.Errorf("sim: unknown subcommand %q", sub)
	}
	return f(&o)
}

// runsOr returns -runs if set, else def.
func (o *simOpts) runsOr(def int) int {
	if o.runs > 0 {
		return o.runs
	}
	return def
}

// sizes returns the ns up to -maxn.
func (o *simOpts) sizes(ns []int) []int {
	var out []int
	for _, n := range ns {
		if (o.maxN == 0 || n <= o.maxN) && n >= o.minN {
			out = append(out, n)
		}
	}
	return out
}

// --- stab ------------------------------------------------------------------

func simStab(o *simOpts) error {
	ns := []int{1000, 4000, 16000, 64000, 256000}
	runsFor := func(n int) int {
		switch {
		case n <= 4000:
			return o.runsOr(20)
		case n <= 16000:
			return o.runsOr(8)
		case n <= 64000:
			return o.runsOr(3)
		}
		return o.runsOr(1)
	}
	if o.quick {
		ns = []int{64, 256, 1024}
		runsFor = func(int) int { return o.runsOr(4) }
	}
	ns = o.sizes(ns)
	type job struct {
		sc   sim.Scenario
		plan sim.FailurePlan
		name string
		n    int
	}
	var jobs []job
	total := 0
	for _, sc := range []sim.Scenario{sim.LowNoise, sim.LowLat} {
		plans := []struct {
			name string
			p    sim.FailurePlan
		}{{"max-burst", sim.Burst{Window: sc.Delta / 10}}, {"random-1y", sim.Exponential{MTBF: sim.Year}}}
		for _, p := range plans {
			if !slices.Contains(strings.Split(o.plans, ","), p.name) {
				continue
			}
			for _, n := range ns {
				jobs = append(jobs, job{sc, p.p, p.name, n})
				total += runsFor(n) * n // progress weighted by size
			}
		}
	}
	bar := newBar(o, "stab", total)
	w, err := newCSV(o, "stab.csv", "scenario", "plan", "n", "runs", "failures", "first_known_s", "first_known_se",
		"stabilized_s", "stabilized_se", "max_stabilized_s", "unstable", "msgs", "events")
	if err != nil {
		return err
	}
	type key struct{ sc, plan string }
	series := map[key][]sim.StabStats{}
	for _, j := range jobs {
		n := j.n
		st, err := sim.StabStudy(j.sc, n, j.plan, runsFor(n), o.workers, o.seed, func() { bar.add(n) })
		if err != nil {
			return err
		}
		series[key{j.sc.Name, j.name}] = append(series[key{j.sc.Name, j.name}], st)
		w.row(j.sc.Name, j.name, n, st.Runs, st.Failures, st.FirstKnown, st.FirstKnownSE, st.Stabilized, st.StabilizedSE,
			st.MaxStabilized, st.Unstable, st.Msgs, st.Events)
	}
	bar.finish()
	if err := w.close(); err != nil {
		return err
	}
	for _, sc := range []sim.Scenario{sim.LowNoise, sim.LowLat} {
		var ls []any
		for _, plan := range []string{"max-burst", "random-1y"} {
			s := series[key{sc.Name, plan}]
			ls = append(ls, plan+": all know first", xy(s, func(v sim.StabStats) (float64, float64) { return float64(v.N), v.FirstKnown }),
				plan+": stable", xy(s, func(v sim.StabStats) (float64, float64) { return float64(v.N), v.Stabilized }))
		}
		if err := savePlot(o, "stab_"+strings.ToLower(sc.Name)+".png",
			fmt.Sprintf("%s (h=%v, δ=%v, t=1ms): stabilization", sc.Name, time.Duration(sc.H), time.Duration(sc.Delta)),
			"n (nodes)", "time after the first failure (s)", true, ls...); err != nil {
			return err
		}
	}
	return nil
}

// --- probe -----------------------------------------------------------------

func simProbe(o *simOpts) error {
	ns := []int{100, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 256000}
	runs := o.runsOr(2000)
	if o.quick {
		ns = []int{10, 100, 1000, 10000}
		runs = o.runsOr(50)
	}
	ns = o.sizes(ns)
	total := 0
	for _, n := range ns {
		total += runs * n
	}
	bar := newBar(o, "probe", total)
	w, err := newCSV(o, "probe.csv", "n", "runs", "mean_rounds", "max_rounds", "rounds_1e-9_one", "rounds_1e-9_all",
		"mean_L", "max_L", "bound_lo", "bound_hi")
	if err != nil {
		return err
	}
	var all []sim.ProbeStats
	for _, n := range ns {
		if n < 3 {
			return fmt.Errorf("sim probe: n = %d, want ≥ 3", n)
		}
		st := sim.ProbeStudy(n, runs, o.workers, o.seed, func() { bar.add(n) })
		all = append(all, st)
		w.row(n, runs, st.MeanRounds, st.MaxRounds, st.RoundsOne, st.RoundsAll, st.MeanL, st.MaxL, st.BoundLo, st.BoundHi)
	}
	bar.finish()
	if err := w.close(); err != nil {
		return err
	}
	f := func(g func(sim.ProbeStats) float64) plotter.XYs {
		return xy(all, func(v sim.ProbeStats) (float64, float64) { return float64(v.N), g(v) })
	}
	if err := savePlot(o, "probe_rounds.png", "Random probing: rounds until every node is probed", "N", "rounds", true,
		"mean (simulated)", f(func(v sim.ProbeStats) float64 { return v.MeanRounds }),
		"max (simulated)", f(func(v sim.ProbeStats) float64 { return float64(v.MaxRounds) }),
		"one node w.p. 1-1e-9", f(func(v sim.ProbeStats) float64 { return float64(v.RoundsOne) }),
		"all nodes w.p. 1-1e-9", f(func(v sim.ProbeStats) float64 { return float64(v.RoundsAll) })); err != nil {
		return err
	}
	return savePlot(o, "probe_L.png", "Random probing: largest pings to one node in a round, L(N)", "N", "pings", true,
		"mean L(N)", f(func(v sim.ProbeStats) float64 { return v.MeanL }),
		"max L(N)", f(func(v sim.ProbeStats) float64 { return float64(v.MaxL) }),
		"ln N/ln ln N", f(func(v sim.ProbeStats) float64 { return v.BoundLo }),
		"3 ln N/ln ln N", f(func(v sim.ProbeStats) float64 { return v.BoundHi }))
}

// --- bcast -----------------------------------------------------------------

func simBcast(o *simOpts) error {
	n0, runs0 := 4096, o.runsOr(10000)
	scaleN := []int{128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	scaleRuns := o.runsOr(200)
	if o.quick {
		n0, runs0 = 256, o.runsOr(200)
		scaleN, scaleRuns = []int{64, 128, 256}, o.runsOr(50)
	}
	scaleN = o.sizes(scaleN)
	if !o.scaling {
		scaleN = nil
	}
	algs := strings.Split(o.algs, ",")
	scs := sim.Scenarios(n0)[:3]
	total := len(algs) * len(scs) * runs0
	for range scaleN {
		total += len(algs) * 2 * scaleRuns
	}
	bar := newBar(o, "bcast", total)
	w, err := newCSV(o, fmt.Sprintf("bcast_%d.csv", n0), bcastHeader...)
	if err != nil {
		return err
	}
	study := map[string][]sim.BcastStats{}
	for _, sc := range scs {
		for _, a := range algs {
			st, err := sim.BcastStudy(a, n0, sc, runs0, o.workers, o.seed, func() { bar.add(1) })
			if err != nil {
				return err
			}
			study[sc.Name] = append(study[sc.Name], st)
			w.row(bcastRow(st)...)
		}
	}
	if err := w.close(); err != nil {
		return err
	}
	ws, err := newCSV(o, "bcast_scaling.csv", bcastHeader...)
	if err != nil {
		return err
	}
	scaling := map[string]map[string][]sim.BcastStats{"none": {}, "n/64": {}}
	for _, n := range scaleN {
		for _, sc := range []sim.BcastScenario{sim.Scenarios(n)[0], sim.Scenarios(n)[3]} {
			for _, a := range algs {
				st, err := sim.BcastStudy(a, n, sc, scaleRuns, o.workers, o.seed, func() { bar.add(1) })
				if err != nil {
					return err
				}
				scaling[sc.Name][a] = append(scaling[sc.Name][a], st)
				ws.row(bcastRow(st)...)
			}
		}
	}
	bar.finish()
	if err := ws.close(); err != nil {
		return err
	}
	for _, sc := range scs {
		var ls []any
		for _, st := range study[sc.Name] {
			ls = append(ls, st.Alg, plotter.XYs{{X: st.Work, Y: st.Latency}})
		}
		if err := saveScatter(o, fmt.Sprintf("bcast_%d_%s.png", n0, sc.Name),
			fmt.Sprintf("N=%d, L=2µs o=1µs, failures: %s", n0, sc.Name), "work (messages)", "latency (µs)", ls...); err != nil {
			return err
		}
	}
	for _, name := range []string{"none", "n/64"} {
		var ls []any
		for _, a := range algs {
			ls = append(ls, a, xy(scaling[name][a], func(v sim.BcastStats) (float64, float64) { return float64(v.N), v.Latency }))
		}
		file := "bcast_scaling_" + strings.ReplaceAll(name, "/", "") + ".png"
		if err := savePlot(o, file, "Broadcast latency vs N, failures: "+name, "N", "latency (µs)", true, ls...); err != nil {
			return err
		}
	}
	return nil
}

var bcastHeader = []string{"alg", "n", "scenario", "runs", "T", "C", "latency_us", "latency_p50_us", "latency_p99_us",
	"latency_max_us", "last_delivery_us", "work_msgs", "inconsistency", "inconsistent_runs", "sos_nodes", "latency_x_work", "model"}

func bcastRow(st sim.BcastStats) []any {
	return []any{st.Alg, st.N, st.Scenario, st.Runs, st.T, st.C, st.Latency, st.LatencyP50, st.LatencyP99, st.LatencyMax,
		st.Delivery, st.Work, st.Inconsistency, st.Inconsistent, st.SOS, st.LatencyWork(), st.Model}
}

// --- tsweep ----------------------------------------------------------------

func simTSweep(o *simOpts) error {
	n, runs := 4096, o.runsOr(2000)
	if o.quick {
		n, runs = 256, o.runsOr(100)
	}
	algs := []string{"OCG", "CCG", "FCG", "CTF"}
	sc := sim.Scenarios(n)[1]
	type pt struct {
		alg string
		T   int
	}
	var pts []pt
	for _, a := range algs {
		for T := 6; T <= 48; T += 2 {
			pts = append(pts, pt{a, T})
		}
	}
	bar := newBar(o, "tsweep", len(pts)*runs)
	w, err := newCSV(o, "tsweep.csv", bcastHeader...)
	if err != nil {
		return err
	}
	lat, work := map[string]plotter.XYs{}, map[string]plotter.XYs{}
	for _, p := range pts {
		st, err := sim.BcastStudyT(p.alg, n, p.T, sc, runs, o.workers, o.seed, func() { bar.add(1) })
		if err != nil {
			return err
		}
		w.row(bcastRow(st)...)
		if st.Inconsistent == 0 && st.Latency < 400 {
			lat[p.alg] = append(lat[p.alg], plotter.XY{X: float64(p.T), Y: st.Latency})
			work[p.alg] = append(work[p.alg], plotter.XY{X: float64(p.T), Y: st.Work})
		}
	}
	bar.finish()
	if err := w.close(); err != nil {
		return err
	}
	var ls, ws []any
	for _, a := range algs {
		ls, ws = append(ls, a, lat[a]), append(ws, a, work[a])
	}
	title := fmt.Sprintf("N=%d, %s failures, consistent runs only", n, sc.Name)
	if err := savePlot(o, "tsweep_latency.png", "Latency vs T, "+title, "T (µs)", "latency (µs)", false, ls...); err != nil {
		return err
	}
	return savePlot(o, "tsweep_work.png", "Work vs T, "+title, "T (µs)", "messages", false, ws...)
}

// --- era -------------------------------------------------------------------

func simERA(o *simOpts) error {
	ns := []int{16, 64, 256, 1024, 4096, 16384, 65536}
	runs := o.runsOr(20)
	if o.quick {
		ns, runs = []int{16, 64, 256, 1024}, o.runsOr(5)
	}
	ns = o.sizes(ns)
	trees := []string{"bin", "4ary", "star", "bin/bin", "bin/star"}
	nets := []struct {
		name   string
		net    sim.Network
		unit   float64
		detect int64
	}{{"steps", sim.Steps{}, 1, 1}, {"logp", sim.LogP{L: 2000, O: 1000, G: 1000}, 1000, 10000}}
	total := 0
	for _, n := range ns {
		total += len(trees) * len(nets) * (1 + runs) * n
	}
	bar := newBar(o, "era", total)
	w, err := newCSV(o, "era.csv", "net", "tree", "n", "failures", "runs", "decided", "decided_max", "first_decided",
		"msgs", "two_depth", "thm5_2log_delta", "undecided", "disagreed")
	if err != nil {
		return err
	}
	type key struct{ net, tree string }
	res := map[key][]sim.ERAStats{}
	for _, nt := range nets {
		for _, tn := range trees {
			for _, n := range ns {
				tree, deg, err := sim.ERATree(tn, n)
				if err != nil {
					return err
				}
				cfg := sim.ERAConfig{N: n, Tree: tree, Net: nt.net}
				ff, err := sim.ERAStudy(tn, cfg, 1, 1, o.seed, nt.unit, func() { bar.add(n) })
				if err != nil {
					return err
				}
				cfg.Failures, cfg.Window, cfg.Detect = 3, int64(ff.Decided*nt.unit)+1, nt.detect
				if n <= 3 {
					cfg.Failures = 1
				}
				fl, err := sim.ERAStudy(tn, cfg, runs, o.workers, o.seed, nt.unit, func() { bar.add(n) })
				if err != nil {
					return err
				}
				bound, thm := 2*sim.TreeDepth(tree, n), sim.ERABound(n, deg)
				for _, st := range []sim.ERAStats{ff, fl} {
					if st.Undecided > 0 || st.Disagreed > 0 {
						return fmt.Errorf("sim era: %s n=%d f=%d: %d undecided, %d disagreeing runs", tn, n, st.Failures, st.Undecided, st.Disagreed)
					}
					w.row(nt.name, tn, n, st.Failures, st.Runs, st.Decided, st.DecidedMax, st.FirstDecided, st.Msgs, bound, thm, st.Undecided, st.Disagreed)
				}
				res[key{nt.name, tn}] = append(res[key{nt.name, tn}], ff, fl)
			}
		}
	}
	bar.finish()
	if err := w.close(); err != nil {
		return err
	}
	for _, nt := range nets {
		var ls []any
		for _, tn := range trees {
			var ff, fl plotter.XYs
			for i, st := range res[key{nt.name, tn}] {
				p := plotter.XY{X: float64(st.N), Y: st.Decided}
				if i%2 == 0 {
					ff = append(ff, p)
				} else {
					fl = append(fl, p)
				}
			}
			ls = append(ls, tn, ff, tn+" (3 failures)", fl)
		}
		var bound plotter.XYs
		for _, n := range ns {
			bound = append(bound, plotter.XY{X: float64(n), Y: float64(sim.ERABound(n, 2))})
		}
		ylab := "parallel steps"
		if nt.name == "logp" {
			ylab = "µs (L=2µs, o=g=1µs)"
		} else {
			ls = append(ls, "Theorem 5: 2 log2 n (bin)", bound)
		}
		if err := savePlot(o, "era_"+nt.name+".png", "ERA: time until every process decided", "n", ylab, true, ls...); err != nil {
			return err
		}
	}
	return nil
}

// --- hostcrash -------------------------------------------------------------

// hostCrashRow is one row of the host-crash study: a network, n, the
// crash, the mending window and whether the detectors know the hosts.
type hostCrashRow struct {
	sc       sim.Scenario
	n        int
	plan     sim.HostCrash
	probe    int
	labelled bool
}

// hostCrashRows are the rows of the study: hosts of 16 and 64 ranks, one
// and 4 at once, each with Algorithm 1 (W = 0), block mending (W = 16,
// and 64 for hosts of 64) and block mending with host labels (W = 16,
// sim.DetectorConfig.Hosts). Unless heavy, Algorithm 1 is left out where
// more than 64 ranks die among more than 4,096: one broadcast to every
// rank per dead rank makes such a run take over 10 minutes here. With
// labelsOnly, only the rows with host labels.
func hostCrashRows(ns []int, heavy, labelsOnly bool) []hostCrashRow {
	var rows []hostCrashRow
	for _, sc := range []sim.Scenario{sim.LowLat, sim.LowNoise} {
		for _, n := range ns {
			for _, size := range []int{16, 64} {
				for _, hosts := range []int{1, 4} {
					probes := []int{0, 16}
					if size >= 64 {
						probes = append(probes, 64)
					}
					for _, w := range probes {
						if labelsOnly || w == 0 && !heavy && n > 4096 && size*hosts > 64 {
							continue
						}
						rows = append(rows, hostCrashRow{sc, n, sim.HostCrash{HostSize: size, Hosts: hosts}, w, false})
					}
					rows = append(rows, hostCrashRow{sc, n, sim.HostCrash{HostSize: size, Hosts: hosts}, 16, true})
				}
			}
		}
	}
	return rows
}

func simHostCrash(o *simOpts) error {
	ns, runs := []int{4096, 65536}, o.runsOr(3)
	if o.quick {
		ns, runs = []int{512}, o.runsOr(2)
	}
	ns = o.sizes(ns)
	rows := hostCrashRows(ns, o.heavy, o.labels)
	if len(rows) == 0 {
		return fmt.Errorf("sim hostcrash: no n of %v within -minn %d and -maxn %d", []int{4096, 65536}, o.minN, o.maxN)
	}
	// Progress weighted by the broadcasts a run makes (about one per rank
	// with Algorithm 1, a few per host with block mending) times n.
	weight := func(r hostCrashRow) int {
		b := r.plan.Hosts
		if r.probe == 0 {
			b *= r.plan.HostSize
		} else if !r.labelled {
			b *= 2 + r.plan.HostSize/r.probe
		} else {
			b *= 2
		}
		return r.n * b
	}
	total := 0
	for _, r := range rows {
		total += runs * weight(r)
	}
	bar := newBar(o, "hostcrash", total)
	w, err := newCSV(o, "hostcrash.csv", "scenario", "n", "host_size", "hosts", "window_s", "probe", "host_labels", "runs", "failures",
		"block_mean", "block_max", "detections", "all_known_s", "all_known_se", "all_known_min_s", "all_known_max_s",
		"stabilized_s", "stabilized_max_s", "block_bound_s", "within_bound", "thm1_formula_s", "incomplete", "unstable",
		"false_suspicions", "evicted", "bcast_msgs", "newobserver_msgs", "probe_msgs", "sync_msgs", "other_msgs", "events")
	if err != nil {
		return err
	}
	var all []sim.HostCrashStats
	for _, r := range rows {
		st, err := sim.HostCrashStudy(r.sc, r.n, r.plan, r.probe, r.labelled, runs, o.workers, o.seed, func() { bar.add(weight(r)) })
		if err != nil {
			return err
		}
		all = append(all, st)
		w.row(st.Scenario, st.N, st.HostSize, st.Hosts, float64(st.Window)/1e9, st.Probe, st.Labelled, st.Runs, st.Failures,
			st.Block, st.BlockMax, st.Detections, st.AllKnown, st.AllKnownSE, st.AllKnownMin, st.AllKnownMax,
			st.Stabilized, st.StabilizedMax, st.Bound, st.WithinBound, st.AlgBound, st.Incomplete, st.Unstable,
			st.FalseSuspicions, st.Evicted, st.BcastMsgs, st.NewObserverMsgs, st.ProbeMsgs, st.SyncMsgs, st.OtherMsgs, st.Events)
	}
	bar.finish()
	if err := w.close(); err != nil {
		return err
	}
	// One figure: time until all know against the largest dead block, in
	// units of δ (both networks), with the bound of each block-mending row.
	delta := map[string]float64{sim.LowLat.Name: float64(sim.LowLat.Delta) / 1e9, sim.LowNoise.Name: float64(sim.LowNoise.Delta) / 1e9}
	pts := map[string]plotter.XYs{}
	var names []string
	add := func(name string, x, y float64) {
		if _, ok := pts[name]; !ok {
			names = append(names, name)
		}
		pts[name] = append(pts[name], plotter.XY{X: x, Y: y})
	}
	for _, st := range all {
		if st.Runs == st.Incomplete || st.AllKnown <= 0 || st.Block < 1 {
			continue // nothing to place on the log axes
		}
		d := delta[st.Scenario]
		add(mendingName(st.Probe, st.Labelled), st.Block, st.AllKnown/d)
		if st.Probe > 0 && !st.Labelled {
			add(fmt.Sprintf("hb.BlockBound, W = %d", st.Probe), st.Block, st.Bound/d)
		}
	}
	var series []any
	for _, name := range names {
		series = append(series, name, pts[name])
	}
	if err := saveScatterLog(o, "hostcrash.png", "Host crashes: time until every survivor knows every dead rank",
		"largest dead block (ranks, mean of the runs)", "time after the crash (δ)", true, series...); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(o.out, "hostcrash.md"))
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	var out io.Writer = f
	if !o.quiet {
		out = io.MultiWriter(f, o.stdout)
	}
	hostCrashTable(out, all)
	return f.Close()
}

func mendingName(probe int, labelled bool) string {
	switch {
	case probe == 0:
		return "Algorithm 1"
	case labelled:
		return fmt.Sprintf("block, W = %d, host labels", probe)
	}
	return fmt.Sprintf("block, W = %d", probe)
}

// hostCrashTable writes the markdown table of the host-crash study: per
// row the time until every survivor knew every dead rank (mean, min–max
// over the runs), how much faster than Algorithm 1 on the same crashes,
// hb.BlockBound (hb.HostBlockBound with host labels) of the largest block and the runs within it, the mean
// message counts per run, and the false reports and incomplete runs.
func hostCrashTable(w io.Writer, all []sim.HostCrashStats) {
	fmt.Fprint(w, "| network | n | crash | mending | runs | largest block | all know, s: mean (min–max) | Alg. 1 ÷ this | "+
		"BlockBound, s | within bound | stable, s | broadcast | NEWOBSERVER | PROBE/ALIVE | SYNC | false reports | incomplete |\n"+
		"|---|---:|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	type key struct {
		sc          string
		n, size, hs int
	}
	alg1 := map[key]float64{}
	for _, st := range all {
		if st.Probe == 0 && st.Incomplete == 0 {
			alg1[key{st.Scenario, st.N, st.HostSize, st.Hosts}] = st.AllKnown
		}
	}
	secs := func(x float64) string {
		switch {
		case x >= 100:
			return fmt.Sprintf("%.0f", x)
		case x >= 10:
			return fmt.Sprintf("%.1f", x)
		}
		return fmt.Sprintf("%.3f", x)
	}
	msgs := func(x float64) string {
		if x < 1e4 {
			return fmt.Sprintf("%.0f", x)
		}
		return fmt.Sprintf("%.3g", x)
	}
	for _, st := range all {
		crash := fmt.Sprintf("%d × %d", st.Hosts, st.HostSize)
		if st.Window > 0 {
			crash += fmt.Sprintf(" within %v", time.Duration(st.Window))
		}
		block := fmt.Sprint(st.BlockMax)
		if st.Block != float64(st.BlockMax) {
			block = fmt.Sprintf("%.1f (max %d)", st.Block, st.BlockMax)
		}
		known, ratio, bound, within := "—", "—", "—", "—"
		if st.Incomplete < st.Runs {
			known = fmt.Sprintf("%s (%s–%s)", secs(st.AllKnown), secs(st.AllKnownMin), secs(st.AllKnownMax))
			if a, ok := alg1[key{st.Scenario, st.N, st.HostSize, st.Hosts}]; ok && st.Probe > 0 && st.AllKnown > 0 {
				ratio = fmt.Sprintf("%.1f", a/st.AllKnown)
			}
		}
		if st.Probe > 0 {
			bound, within = secs(st.Bound), fmt.Sprintf("%d of %d", st.WithinBound, st.Runs)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d |\n",
			st.Scenario, st.N, crash, mendingName(st.Probe, st.Labelled), st.Runs, block, known, ratio, bound, within, secs(st.Stabilized),
			msgs(st.BcastMsgs), msgs(st.NewObserverMsgs), msgs(st.ProbeMsgs), msgs(st.SyncMsgs), st.FalseSuspicions, st.Incomplete)
	}
}

// --- output helpers ----------------------------------------------------------

// csvOut writes one CSV file.
type csvOut struct {
	f *os.File
	w *csv.Writer
}

func newCSV(o *simOpts, name string, header ...string) (*csvOut, error) {
	f, err := os.Create(filepath.Join(o.out, name))
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	c := &csvOut{f: f, w: csv.NewWriter(f)}
	c.w.Write(header) //nolint:errcheck // reported by Flush
	return c, nil
}

func (c *csvOut) row(vs ...any) {
	rec := make([]string, len(vs))
	for i, v := range vs {
		switch x := v.(type) {
		case float64:
			rec[i] = strconv.FormatFloat(x, 'g', 7, 64)
		default:
			rec[i] = fmt.Sprint(x)
		}
	}
	c.w.Write(rec) //nolint:errcheck // reported by Flush
	c.w.Flush()    // a long sweep keeps what it has if interrupted
}

func (c *csvOut) close() error {
	c.w.Flush()
	if err := c.w.Error(); err != nil {
		c.f.Close()
		return fmt.Errorf("sim: writing %s: %w", c.f.Name(), err)
	}
	return c.f.Close()
}

func xy[T any](vs []T, f func(T) (float64, float64)) plotter.XYs {
	out := make(plotter.XYs, 0, len(vs))
	for _, v := range vs {
		x, y := f(v)
		if math.IsNaN(y) || math.IsInf(y, 0) {
			continue
		}
		out = append(out, plotter.XY{X: x, Y: y})
	}
	return out
}

// savePlot draws named line series (name, plotter.XYs, ...) into out/name.
// A plot without any point is not written; a log axis needs x > 0.
func savePlot(o *simOpts, file, title, xl, yl string, logX bool, series ...any) error {
	series = nonEmpty(series)
	if len(series) == 0 {
		return nil
	}
	for i := 1; i < len(series); i += 2 {
		if xs, ok := series[i].(plotter.XYs); ok {
			for _, v := range xs {
				logX = logX && v.X > 0
			}
		}
	}
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xl, yl
	if logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
	}
	p.Legend.Top, p.Legend.Left = true, true
	if err := plotutil.AddLinePoints(p, nonEmpty(series)...); err != nil {
		return fmt.Errorf("sim: plot %s: %w", file, err)
	}
	return save(o, p, file)
}

// saveScatter draws named point sets.
func saveScatter(o *simOpts, file, title, xl, yl string, series ...any) error {
	return saveScatterLog(o, file, title, xl, yl, false, series...)
}

// saveScatterLog is saveScatter, with both axes logarithmic if logXY (every
// coordinate must then be > 0) and the legend at the top left.
func saveScatterLog(o *simOpts, file, title, xl, yl string, logXY bool, series ...any) error {
	if len(nonEmpty(series)) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xl, yl
	p.Legend.Top = true
	if logXY {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
		p.Legend.Left = true
	}
	if err := plotutil.AddScatters(p, nonEmpty(series)...); err != nil {
		return fmt.Errorf("sim: plot %s: %w", file, err)
	}
	return save(o, p, file)
}

// nonEmpty drops (name, XYs) pairs without points.
func nonEmpty(series []any) []any {
	var out []any
	for i := 0; i+1 < len(series); i += 2 {
		if xs, ok := series[i+1].(plotter.XYs); ok && len(xs) == 0 {
			continue
		}
		out = append(out, series[i], series[i+1])
	}
	return out
}

func save(o *simOpts, p *plot.Plot, file string) error {
	if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(o.out, file)); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}

// bar is a progress bar on stderr, redrawn in place at most 5 times a
// second on a terminal; elsewhere (a file, a pipe) one line per tenth done,
// with no carriage returns.
type bar struct {
	mu          sync.Mutex
	w           io.Writer
	tty         bool
	label       string
	total, done int
	tenths      int // lines printed, off a terminal
	start, last time.Time
}

func newBar(o *simOpts, label string, total int) *bar {
	b := &bar{w: o.stderr, label: label, total: max(total, 1), start: time.Now()}
	if f, ok := o.stderr.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.tty = true
		}
	}
	if o.quiet {
		b.w = nil
	}
	return b
}

func (b *bar) add(k int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += k
	if b.w == nil {
		return
	}
	if !b.tty {
		if t := 10 * b.done / b.total; t > b.tenths && b.done < b.total {
			b.tenths = t
			b.draw()
		}
		return
	}
	if time.Since(b.last) < 200*time.Millisecond {
		return
	}
	b.last = time.Now()
	b.draw()
}

func (b *bar) draw() {
	const width = 30
	frac := min(1, float64(b.done)/float64(b.total))
	fill := int(frac * width)
	el := time.Since(b.start)
	eta := "?"
	if frac > 0 {
		eta = (time.Duration(float64(el)/frac) - el).Round(time.Second).String()
	}
	line := fmt.Sprintf("%-6s [%s%s] %3.0f%%  %v elapsed, eta %s", b.label, strings.Repeat("#", fill),
		strings.Repeat(".", width-fill), 100*frac, el.Round(time.Second), eta)
	if b.tty {
		fmt.Fprintf(b.w, "\r%s   ", line)
	} else {
		fmt.Fprintln(b.w, line)
	}
}

func (b *bar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w == nil {
		return
	}
	b.done = b.total
	b.draw()
	if b.tty {
		fmt.Fprintln(b.w)
	}
}
