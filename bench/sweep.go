package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// Placement says where the detector runs during a noise measurement.
type Placement string

// The two placements compared by seed 004.
const (
	// InProcess: a detector thread inside every application process
	// (libvigil linked into the MPI program).
	InProcess Placement = "in-process"
	// StandAlone: one detector process per rank beside the application
	// (`vigil agent`, started by the local launcher).
	StandAlone Placement = "stand-alone"
)

// DefaultHs are the heartbeat periods of the sweeps.
var DefaultHs = []time.Duration{100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second}

// SweepConfig configures the noise sweep.
type SweepConfig struct {
	MPI      MPIBuild
	VigilBin string
	// Ranks is the number of MPI processes (and of detector ranks).
	Ranks int
	Loads []Load
	Sizes []int
	// MaxReps and TimeLimit bound each size (IMB's rule, then the cut).
	MaxReps   int
	TimeLimit time.Duration
	Hs        []time.Duration
	// DeltaFactor sets δ = DeltaFactor·h (default 10).
	DeltaFactor int
	Placements  []Placement
	// Pairs is the number of interleaved (off, on) pairs per (h, placement).
	Pairs int
	// ProbeDuration, when positive, also runs the selfish-detour probe
	// (pinned to CPU 0) for this long in each stand-alone run.
	ProbeDuration time.Duration
	// Log receives progress lines.
	Log io.Writer
}

// SweepRun is one run of the sweep.
type SweepRun struct {
	H         time.Duration
	Placement Placement
	Pair      int
	On        bool
	Results   []Result
	// Suspicions are false suspicions reported by the detector during the
	// run; Missed its missed heartbeat deadlines (stand-alone only).
	Suspicions int
	Missed     uint64
	// Noise is the selfish-detour probe's result (stand-alone runs with
	// ProbeDuration > 0).
	Noise *NoiseResult
}

// Sweep runs the noise sweep: for each h and placement, Pairs pairs of
// runs, detector off then on, so that slow drifts of the shared machine
// hit both sides alike.
func Sweep(ctx context.Context, cfg SweepConfig) ([]SweepRun, error) {
	if cfg.DeltaFactor <= 1 {
		cfg.DeltaFactor = 10
	}
	if cfg.Pairs < 1 {
		cfg.Pairs = 1
	}
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", a...)
		}
	}
	var runs []SweepRun
	for _, h := range cfg.Hs {
		for _, pl := range cfg.Placements {
			for k := range cfg.Pairs {
				for _, on := range []bool{false, true} {
					if err := ctx.Err(); err != nil {
						return runs, err
					}
					r, err := sweepOne(ctx, cfg, h, pl, on)
					if err != nil {
						return runs, fmt.Errorf("h=%v %s on=%v: %w", h, pl, on, err)
					}
					r.Pair = k
					logf("sweep h=%-6v %-11s pair %d detector %-3s: %d results, %d false suspicions",
						h, pl, k, onOff(on), len(r.Results), r.Suspicions)
					runs = append(runs, r)
				}
			}
		}
	}
	return runs, nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// sweepGrace is the detector's start-up grace in the sweep: short, so that
// suspicions during the (short) runs are possible and counted.
const sweepGrace = 300 * time.Millisecond

func sweepOne(ctx context.Context, cfg SweepConfig, h time.Duration, pl Placement, on bool) (SweepRun, error) {
	run := SweepRun{H: h, Placement: pl, On: on}
	delta := time.Duration(cfg.DeltaFactor) * h
	mr := MPIRun{Bin: cfg.MPI.IMB, Ranks: cfg.Ranks, Loads: cfg.Loads, Sizes: cfg.Sizes, MaxReps: cfg.MaxReps, TimeLimit: cfg.TimeLimit}
	var agents *AgentJob
	if on {
		switch pl {
		case InProcess:
			mr.Bin = cfg.MPI.IMBVigil
			mr.Env = []string{"VIGIL_H=" + fmt.Sprint(h.Nanoseconds()), "VIGIL_DELTA=" + fmt.Sprint(delta.Nanoseconds()),
				"VIGIL_GRACE=" + fmt.Sprint(sweepGrace.Nanoseconds())}
		case StandAlone:
			var err error
			if agents, err = StartAgents(cfg.VigilBin, cfg.Ranks, DetectorSpec{H: h, Delta: delta, Grace: sweepGrace, RealTime: true}, nil); err != nil {
				return run, err
			}
		default:
			return run, fmt.Errorf("bench: unknown placement %q", pl)
		}
	}
	out, err := mr.Run(ctx)
	if err == nil && pl == StandAlone && cfg.ProbeDuration > 0 {
		var nr NoiseResult
		if nr, err = RunProbe(Selfish, ProbeOptions{Duration: cfg.ProbeDuration, CPU: 0}); err == nil {
			run.Noise = &nr
		}
	}
	if agents != nil {
		rep := agents.Stop()
		run.Suspicions, run.Missed = rep.Suspicions, rep.Missed
	}
	if err != nil {
		return run, err
	}
	run.Results = out.Results
	if out.VigilEvents > 0 {
		run.Suspicions = out.VigilEvents
	}
	return run, nil
}

// OverheadRow is the sweep's verdict for one load, size, h and placement.
type OverheadRow struct {
	Load      Load
	Size      int
	H         time.Duration
	Placement Placement
	// Off and On are the mean maximum latencies (t_max) of the group's
	// interleaved runs, in microseconds.
	Off, On float64
	// Overhead = (On − Off) / Off.
	Overhead float64
	// MedianOverhead is the same with medians instead of means: robust to
	// the odd run where the machine's other jobs took a whole timeslice.
	MedianOverhead float64
	// Band is the natural variability of every off run of this load and
	// size in the sweep (relative σ).
	Band Band
	// Significant is true when |Overhead| exceeds the band.
	Significant bool
	// Suspicions sums the false suspicions of the group's on runs (for the
	// whole run, which covers every load and size).
	Suspicions int
}

// Overheads reduces sweep runs to overhead rows, sorted by load, size,
// placement and h.
func Overheads(runs []SweepRun) []OverheadRow {
	type ls struct {
		l Load
		s int
	}
	type grp struct {
		ls
		h  time.Duration
		pl Placement
	}
	offAll := map[ls][]float64{}
	off, on := map[grp][]float64{}, map[grp][]float64{}
	susp := map[grp]int{}
	for _, r := range runs {
		for _, res := range r.Results {
			k := ls{res.Load, res.Size}
			g := grp{k, r.H, r.Placement}
			us := float64(res.TMax) / 1e3
			if r.On {
				on[g] = append(on[g], us)
			} else {
				off[g] = append(off[g], us)
				offAll[k] = append(offAll[k], us)
			}
		}
		if r.On {
			for _, res := range r.Results {
				susp[grp{ls{res.Load, res.Size}, r.H, r.Placement}] += r.Suspicions
			}
		}
	}
	var rows []OverheadRow
	for g, ons := range on {
		offs := off[g]
		if len(offs) == 0 {
			continue
		}
		o, n := Summarize(offs).Mean, Summarize(ons).Mean
		b := VariabilityBand(offAll[g.ls])
		ov := Overhead(o, n)
		rows = append(rows, OverheadRow{Load: g.l, Size: g.s, H: g.h, Placement: g.pl, Off: o, On: n,
			Overhead: ov, MedianOverhead: Overhead(Quantile(offs, 0.5), Quantile(ons, 0.5)), Band: b, Significant: !math.IsNaN(ov) && b.Significant(ov), Suspicions: susp[g]})
	}
	slices.SortFunc(rows, func(a, b OverheadRow) int {
		switch {
		case a.Load != b.Load:
			return slices.Index(Loads, a.Load) - slices.Index(Loads, b.Load)
		case a.Size != b.Size:
			return a.Size - b.Size
		case a.Placement != b.Placement:
			if a.Placement < b.Placement {
				return -1
			}
			return 1
		}
		return int(a.H - b.H)
	})
	return rows
}
