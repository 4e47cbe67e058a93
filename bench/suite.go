package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Parts are the suite's parts, in the order they run.
var Parts = []string{"imb-go", "imb-mpi", "noise", "sweep", "accuracy", "rtprocess", "lateness", "cost", "sched", "h2h", "hostcrash", "propagation"}

// ExtraParts run only when named (vigil-bench storm, vigil-bench jobstop,
// or -parts): each takes minutes at its acceptance size, so quick and full
// leave them out.
var ExtraParts = []string{"storm", "jobstop"}

// allParts are Parts and ExtraParts, in the order they run.
func allParts() []string { return append(slices.Clone(Parts), ExtraParts...) }

// accuracySizes are the message sizes the IMB loads of the accuracy and
// guard steps loop over.
var accuracySizes = []int{0, 1 << 10, 64 << 10}

// NoiseRow is a noise probe run, with or without a stand-alone detector
// at heartbeat period H.
type NoiseRow struct {
	H    time.Duration
	On   bool
	Pair int
	NoiseResult
}

// Suite runs the benchmark parts of a profile and keeps their results.
type Suite struct {
	Profile Profile
	// Root is the module's source tree (for bench/csrc and ./capi).
	Root string
	// VigilBin is the product's vigil executable (its `vigil agent`s).
	VigilBin string
	// BenchBin is the bench module's vigil-bench executable (its
	// `child` processes: the head-to-head's and the lateness part's).
	BenchBin string
	// Out is the output directory.
	Out string
	// Command is the command line recorded in the summary.
	Command string
	Log     io.Writer
	// CostHeartbeat is the cost part's CostConfig.Heartbeat.
	CostHeartbeat string
	// CostGoEmitter is the cost part's CostConfig.GoEmitter.
	CostGoEmitter bool
	// CostDelta is the cost part's CostConfig.Delta.
	CostDelta time.Duration
	// Storm is the storm part's configuration; the zero values of its Ks
	// and Runs take the profile's, of the rest the part's defaults
	// (stormDefaults). StormAccuracy runs its accuracy-at-scale rows too,
	// at the N of StormAccuracyNs (default 32, 64, 128).
	Storm StormConfig
	// JobStop is the jobstop part's configuration (its zero fields: 20
	// runs of 128 agents, both ways, h = 10 ms, δ = 50 ms).
	JobStop         JobStopConfig
	StormAccuracy   bool
	StormNoBursts   bool // only the accuracy-at-scale rows
	StormAccuracyNs []int

	Started   time.Time
	Durations map[string]time.Duration
	Errors    map[string]string

	MPI       MPIBuild
	IMBGo     []Result
	IMBMPI    []Result
	Noise     []NoiseRow
	SweepRuns []SweepRun
	Overheads []OverheadRow
	Accuracy  []AccuracyRow
	Verdicts  []AccuracyVerdict
	RTProcess []GuardRow
	Lateness  []LatenessRow
	Cost      []CostRun
	Sched     []AttributionRow
	H2H       []H2HRow
	HostCrash []HostCrashRow
	Propag    []PropagationRow
	Storms    []StormRun
	JobStops  []JobStopRun
	StormAcc  []CostRun
}

func (s *Suite) logf(format string, a ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, format+"\n", a...)
	}
}

// Run runs the named parts (all when parts is empty). A part that fails is
// recorded in Errors and the others still run.
func (s *Suite) Run(ctx context.Context, parts []string) error {
	if len(parts) == 0 {
		parts = Parts
	}
	for _, p := range parts {
		if !slices.Contains(allParts(), p) {
			return fmt.Errorf("bench: unknown part %q (want %s)", p, strings.Join(allParts(), ", "))
		}
	}
	s.Started = time.Now()
	s.Durations, s.Errors = map[string]time.Duration{}, map[string]string{}
	needMPI := slices.ContainsFunc(parts, func(p string) bool {
		return p == "imb-mpi" || p == "sweep" || p == "accuracy" || p == "rtprocess"
	})
	if needMPI {
		s.logf("building the MPI load program and libvigil")
		b, err := BuildMPI(ctx, s.Root, filepath.Join(s.Out, "build"))
		if err != nil {
			return err
		}
		s.MPI = b
	}
	pr := s.Profile
	for _, p := range allParts() {
		if !slices.Contains(parts, p) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		s.logf("== %s", p)
		var err error
		switch p {
		case "imb-go":
			err = s.runIMBGo()
		case "imb-mpi":
			var o MPIOutput
			o, err = MPIRun{Bin: s.MPI.IMB, Ranks: pr.IMBRanks, Loads: Loads, Sizes: pr.IMBSizes, MaxReps: pr.IMBMaxReps,
				TimeLimit: pr.IMBTimeLimit}.Run(ctx)
			s.IMBMPI = o.Results
		case "noise":
			err = s.runNoise(ctx)
		case "sweep":
			s.SweepRuns, err = Sweep(ctx, SweepConfig{MPI: s.MPI, VigilBin: s.VigilBin, Ranks: pr.IMBRanks, Loads: Loads,
				Sizes: pr.SweepSizes, MaxReps: pr.SweepMaxReps, TimeLimit: pr.SweepTimeLimit, Hs: pr.SweepHs,
				Placements: []Placement{InProcess, StandAlone}, Pairs: pr.SweepPairs, ProbeDuration: pr.ProbeDuration / 4, Log: s.Log})
			s.Overheads = Overheads(s.SweepRuns)
		case "accuracy":
			s.Accuracy, s.Verdicts, err = Accuracy(ctx, AccuracyConfig{VigilBin: s.VigilBin, MPI: s.MPI, Ranks: pr.AccuracyRanks,
				Hs: pr.AccuracyHs, Duration: pr.AccuracyDuration, Loads: pr.AccuracyLoads, Sizes: accuracySizes,
				RealTime: []bool{false, true}, Log: s.Log})
		case "rtprocess":
			s.RTProcess, err = Guard(ctx, GuardConfig{Option: OptionRTProcess, VigilBin: s.VigilBin, MPI: s.MPI,
				Ranks: pr.AccuracyRanks, Hs: pr.GuardHs, Duration: pr.AccuracyDuration, Rounds: pr.GuardRounds, Loads: pr.GuardLoads,
				Sizes: accuracySizes, RealTime: true, Log: s.Log})
		case "lateness":
			var cbin string
			if cbin, err = BuildLateness(ctx, s.Root, filepath.Join(s.Out, "build")); err == nil {
				s.Lateness, err = Lateness(ctx, LatenessConfig{CBin: cbin, BenchBin: s.BenchBin, Hs: pr.LatenessHs,
					Duration: pr.LatenessDuration, Rounds: pr.LatenessRounds, Loads: []string{Idle, Compute}, RealTime: true, Log: s.Log})
			}
		case "cost":
			err = s.runCost(ctx)
		case "sched":
			err = s.runSched(ctx)
		case "hostcrash":
			hc := HostCrashConfig{VigilBin: s.VigilBin, N: 16, First: 8, Block: 8, H: 10 * time.Millisecond,
				Delta: 50 * time.Millisecond, Probes: []int{16, 2, 0}, Late: true, RanksPerHost: 8, Labelled: []int{2},
				Runs: pr.HostCrashRuns, Log: s.Log}
			s.HostCrash, err = HostCrash(ctx, hc)
			if s.Log != nil && len(s.HostCrash) > 0 {
				HostCrashTable(func(f string, a ...any) { fmt.Fprintf(s.Log, f, a...) }, hc, s.HostCrash)
			}
		case "propagation":
			pc := PropagationConfig{VigilBin: s.VigilBin, Ns: pr.PropagationNs, Broadcasts: []string{"hba", "bmg", "ocg", "ccg", "fcg", "ctree"},
				H: 20 * time.Millisecond, Delta: 200 * time.Millisecond, Runs: pr.PropagationRuns, Log: s.Log}
			if o := pr.PropagationGossipStep; o > 0 {
				pc.Extra = []string{"-gossip-step", o.String(), "-gossip-latency", (2 * o).String()}
			}
			s.Propag, err = Propagation(ctx, pc)
			if s.Log != nil && len(s.Propag) > 0 {
				PropagationTable(func(f string, a ...any) { fmt.Fprintf(s.Log, f, a...) }, pc, s.Propag)
			}
		case "storm":
			err = s.runStorm(ctx)
		case "jobstop":
			jc := s.JobStop
			jc.VigilBin, jc.Log = s.VigilBin, s.Log
			if len(jc.Ns) == 0 {
				jc.Ns = []int{128}
			}
			if len(jc.Ways) == 0 {
				jc.Ways = []string{JobStopGroup, JobStopEach}
			}
			if jc.Runs == 0 {
				jc.Runs = 20
			}
			if jc.H == 0 {
				jc.H, jc.Delta = 10*time.Millisecond, 50*time.Millisecond
			}
			s.JobStops, err = JobStop(ctx, jc)
			if s.Log != nil && len(s.JobStops) > 0 {
				JobStopTable(func(f string, a ...any) { fmt.Fprintf(s.Log, f, a...) }, jc, s.JobStops)
			}
		case "h2h":
			s.H2H, err = HeadToHead(ctx, H2HConfig{BenchBin: s.BenchBin, Sizes: pr.H2HSizes, Systems: pr.H2HSystems, Period: pr.H2HPeriod, DeltaFactor: 5,
				Window: pr.H2HWindow, Several: pr.H2HSeveral, BurnFor: pr.H2HBurn, Wait: pr.H2HWait, Log: s.Log})
		}
		s.Durations[p] = time.Since(t0)
		if err != nil {
			s.Errors[p] = err.Error()
			s.logf("%s failed: %v", p, err)
		}
	}
	return ctx.Err()
}

// runCost runs the cost part and logs its table.
func (s *Suite) runCost(ctx context.Context) error {
	pr := s.Profile
	cbin, err := BuildHBCost(ctx, s.Root, filepath.Join(s.Out, "build"))
	if err != nil {
		return err
	}
	var hbin string
	if pr.CostInProcess {
		if hbin, err = BuildHBHost(ctx, s.Root, filepath.Join(s.Out, "build")); err != nil {
			return err
		}
	}
	s.Cost, err = Cost(ctx, CostConfig{CBin: cbin, VigilBin: s.VigilBin, HostBin: hbin, Hs: pr.CostHs, Ns: pr.CostNs,
		Transports: pr.CostTransports, Rounds: pr.CostRounds, Window: pr.CostWindow, MaxWindow: pr.CostMaxWindow,
		Heartbeat: s.CostHeartbeat, RealTime: true, GoEmitter: s.CostGoEmitter, Delta: s.CostDelta, Log: s.Log})
	if s.Log != nil && len(s.Cost) > 0 {
		CostTable(func(f string, a ...any) { fmt.Fprintf(s.Log, f, a...) }, s.Cost)
	}
	return err
}

// runStorm runs the storm part: the bursts, then the accuracy-at-scale
// rows, and logs their tables.
func (s *Suite) runStorm(ctx context.Context) error {
	cfg := s.Storm
	cfg.VigilBin, cfg.BenchBin, cfg.Log = s.VigilBin, s.BenchBin, s.Log
	stormDefaults(&cfg, s.Profile)
	p := func(f string, a ...any) { fmt.Fprintf(s.Log, f, a...) }
	var err error
	if !s.StormNoBursts {
		s.Storms, err = Storm(ctx, cfg)
	}
	if s.Log != nil && len(s.Storms) > 0 {
		StormTable(p, cfg, s.Storms)
	}
	if ctx.Err() != nil || !s.StormAccuracy {
		return err
	}
	stormErr := err
	cbin, err := BuildHBCost(ctx, s.Root, filepath.Join(s.Out, "build"))
	if err != nil {
		return err
	}
	ac := StormAccuracyConfig{CBin: cbin, VigilBin: s.VigilBin, Ns: s.StormAccuracyNs, Burners: 2, Log: s.Log,
		Timings: [][2]time.Duration{{time.Millisecond, 20 * time.Millisecond}, {10 * time.Millisecond, 50 * time.Millisecond}}}
	if len(ac.Ns) == 0 {
		ac.Ns = []int{32, 64, 128}
	}
	s.StormAcc, err = StormAccuracy(ctx, ac)
	if s.Log != nil && len(s.StormAcc) > 0 {
		p("\n")
		StormAccuracyTable(p, ac, s.StormAcc)
	}
	return errors.Join(stormErr, err)
}

// stormDefaults fills what cfg leaves zero: the profile's Ks and Runs, 128
// ranks, h = 10 ms, δ = 50 ms, both modes, both targets, both systems.
func stormDefaults(cfg *StormConfig, pr Profile) {
	if len(cfg.Ks) == 0 {
		cfg.Ks = pr.StormKs
	}
	if cfg.Runs == 0 {
		cfg.Runs = pr.StormRuns
	}
	if cfg.N == 0 {
		cfg.N = 128
	}
	if cfg.H == 0 {
		cfg.H, cfg.Delta = 10*time.Millisecond, 50*time.Millisecond
	}
	if len(cfg.Modes) == 0 {
		cfg.Modes = []string{StormKill, StormStop}
	}
	if len(cfg.Targets) == 0 {
		cfg.Targets = []string{StormRanks, StormHosts}
	}
	if len(cfg.Systems) == 0 {
		cfg.Systems = []System{Vigil, Memberlist}
	}
}

func (s *Suite) runIMBGo() error {
	g, err := NewTCPGroup(s.Profile.IMBRanks)
	if err != nil {
		return err
	}
	defer g.Close()
	for _, l := range Loads {
		r, err := g.Run(l, RunOptions{Sizes: s.Profile.IMBSizes, MaxReps: s.Profile.IMBMaxReps, TimeLimit: s.Profile.IMBTimeLimit})
		if err != nil {
			return fmt.Errorf("%s: %w", l, err)
		}
		s.IMBGo = append(s.IMBGo, r...)
	}
	return nil
}

// runNoise runs every probe with the detector off and on (stand-alone, 2
// agents) at each of the profile's SchedHs, interleaved off, on, off, on.
func (s *Suite) runNoise(ctx context.Context) error {
	for _, h := range s.Profile.SchedHs {
		for k := range noisePairs {
			for _, on := range []bool{false, true} {
				var agents *AgentJob
				if on {
					var err error
					if agents, err = StartAgents(s.VigilBin, 2, DetectorSpec{H: h, Delta: 10 * h, RealTime: true}, nil); err != nil {
						return err
					}
				}
				for _, p := range Probes {
					if ctx.Err() != nil {
						break
					}
					r, err := RunProbe(p, ProbeOptions{Duration: s.Profile.ProbeDuration, CPU: 0})
					if err != nil {
						if agents != nil {
							agents.Stop()
						}
						return err
					}
					s.Noise = append(s.Noise, NoiseRow{H: h, On: on, Pair: k, NoiseResult: r})
					s.logf("noise %-7s h=%-6v pair %d detector %-3s: noise %.2f %%, max detour %v", p, h, k, onOff(on), 100*r.Noise, r.MaxDetour)
				}
				if agents != nil {
					agents.Stop()
				}
			}
		}
	}
	return nil
}

// noisePairs is the number of off/on pairs of the noise probes.
const noisePairs = 2

func (s *Suite) runSched(ctx context.Context) error {
	for _, h := range s.Profile.SchedHs {
		for _, rt := range []bool{false, true} {
			row, err := Attribute(ctx, s.VigilBin, 2, h, rt, s.Profile.SchedDuration)
			if err != nil {
				return err
			}
			s.Sched = append(s.Sched, row)
			s.logf("sched h=%-6v fifo=%-5v source %s: detector CPU %.2f ms, preemptions %d, taken %.2f ms, emitter run-queue p99 ≤ %v",
				h, rt, row.Source, float64(row.DetectorCPU)/1e6, row.Preemptions, float64(row.StolenNs)/1e6,
				time.Duration(row.EmitterRunq.Quantile(0.99)))
		}
	}
	return nil
}
