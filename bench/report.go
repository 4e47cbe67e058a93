package bench

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/internal/wire"
)

func usStr(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e3, 'f', 3, 64) }
func fstr(x float64) string        { return strconv.FormatFloat(x, 'f', 6, 64) }

// WriteCSVs writes one CSV file per part that has results into s.Out and
// returns their names.
func (s *Suite) WriteCSVs() ([]string, error) {
	var names []string
	write := func(name string, header []string, rows [][]string) error {
		if len(rows) == 0 {
			return nil
		}
		f, err := os.Create(filepath.Join(s.Out, name))
		if err != nil {
			return err
		}
		w := csv.NewWriter(f)
		w.Write(header)
		w.WriteAll(rows)
		if err := w.Error(); err != nil {
			f.Close()
			return err
		}
		names = append(names, name)
		return f.Close()
	}
	imb := func(rs []Result) [][]string {
		var out [][]string
		for _, r := range rs {
			out = append(out, []string{string(r.Load), strconv.Itoa(r.Ranks), strconv.Itoa(r.Size), strconv.Itoa(r.Reps),
				usStr(r.TMin), usStr(r.TMax), usStr(r.TAvg)})
		}
		return out
	}
	imbHdr := []string{"load", "ranks", "bytes", "reps", "t_min_us", "t_max_us", "t_avg_us"}
	var rows [][]string
	for _, r := range s.Noise {
		rows = append(rows, []string{string(r.Probe), usStr(r.H), strconv.Itoa(r.Pair), strconv.FormatBool(r.On), fstr(r.Noise), strconv.Itoa(r.Samples), usStr(r.MaxDetour),
			strconv.FormatUint(r.Detours.Quantile(0.99), 10), strconv.FormatBool(r.Pinned)})
	}
	var sweep [][]string
	for _, r := range s.SweepRuns {
		for _, x := range r.Results {
			noise := ""
			if r.Noise != nil {
				noise = fstr(r.Noise.Noise)
			}
			sweep = append(sweep, []string{usStr(r.H), string(r.Placement), strconv.Itoa(r.Pair), strconv.FormatBool(r.On),
				string(x.Load), strconv.Itoa(x.Size), usStr(x.TMin), usStr(x.TMax), usStr(x.TAvg), strconv.Itoa(r.Suspicions),
				strconv.FormatUint(r.Missed, 10), noise})
		}
	}
	var ov [][]string
	for _, r := range s.Overheads {
		ov = append(ov, []string{string(r.Load), strconv.Itoa(r.Size), usStr(r.H), string(r.Placement), fstr(r.Off), fstr(r.On),
			fstr(r.Overhead), fstr(r.MedianOverhead), fstr(r.Band.Rel), strconv.FormatBool(r.Significant), strconv.Itoa(r.Suspicions)})
	}
	var acc [][]string
	for _, r := range s.Accuracy {
		acc = append(acc, []string{r.Load, strconv.FormatBool(r.RealTime), usStr(r.H), usStr(r.Delta), strconv.Itoa(r.Suspicions),
			strconv.Itoa(r.Suspected), strconv.FormatUint(r.Missed, 10), usStr(r.MaxLate), strconv.Itoa(r.FIFO), strconv.Itoa(r.Evicted)})
	}
	onOff := func(rows []GuardRow) [][]string {
		var out [][]string
		for _, r := range rows {
			out = append(out, []string{r.Load, usStr(r.H), usStr(r.Delta), strconv.Itoa(r.Round), strconv.FormatBool(r.On),
				strconv.Itoa(r.Suspicions), strconv.Itoa(r.Evicted), strconv.FormatUint(r.Held, 10), strconv.FormatUint(r.Missed, 10),
				strconv.Itoa(r.ProcessRT)})
		}
		return out
	}
	rtp := onOff(s.RTProcess)
	onOffHdr := func(option string) []string {
		return []string{"load", "h_us", "delta_us", "round", option, "false_suspicions", "evicted", "held_checks",
			"missed_deadlines", "agents_process_fifo"}
	}
	var late [][]string
	for _, r := range s.Lateness {
		late = append(late, []string{r.Load, usStr(r.H), strconv.Itoa(r.Round), r.Variant, strconv.FormatBool(r.FIFO),
			strconv.FormatUint(r.Wakeups, 10), strconv.FormatUint(r.Missed, 10), usStr(r.MaxLate), strconv.FormatUint(r.GCs, 10),
			usStr(r.Steal)})
	}
	var cost [][]string
	for _, r := range s.Cost {
		for _, x := range r.Samples {
			cost = append(cost, []string{r.Transport, usStr(r.H), strconv.Itoa(r.N), usStr(r.Delta), usStr(r.Check), r.Side,
				strconv.Itoa(r.Round), strconv.Itoa(x.Rank), r.Heartbeat, usStr(x.Window), strconv.FormatInt(int64(x.CPU), 10),
				strconv.FormatInt(int64(x.Emitter), 10), strconv.FormatUint(x.CtxSwitches, 10), fstr(r.USPerPeriod(x)),
				fstr(float64(x.CtxSwitches) / r.Periods(x)), fstr(float64(x.CPU) / float64(x.Window)), strconv.Itoa(r.Suspicions),
				strconv.Itoa(r.AtStop), strconv.FormatUint(r.Missed, 10), strconv.Itoa(r.Lost), fstr(r.Background), usStr(r.Steal),
				r.EmitterHow})
		}
	}
	var sched [][]string
	for _, r := range s.Sched {
		sched = append(sched, []string{usStr(r.H), strconv.FormatBool(r.RealTime), r.Source, usStr(r.Duration),
			strconv.FormatUint(r.DetectorCPU, 10), strconv.FormatUint(r.EmitterCPU, 10), strconv.FormatUint(r.AppCPU, 10),
			strconv.FormatUint(r.Preemptions, 10), strconv.FormatUint(r.StolenNs, 10),
			strconv.FormatUint(r.EmitterRunq.Quantile(0.5), 10), strconv.FormatUint(r.EmitterRunq.Quantile(0.99), 10),
			strconv.FormatUint(r.EmitterRunq.Quantile(1), 10), strconv.FormatUint(r.EmitterWaitNs, 10),
			strconv.FormatUint(r.EmitterSlices, 10), strconv.Itoa(r.Suspicions), r.EmitterHow, r.Why})
	}
	var h2h, lat [][]string
	for _, r := range s.H2H {
		row := []string{string(r.System), strconv.Itoa(r.N), usStr(r.Period), fstr(r.MsgsPerPeriod), fstr(r.BytesPerPeriod)}
		for _, k := range []Kill{r.One, r.Spread, r.Adjacent} {
			row = append(row, usStr(k.First), usStr(k.Stable), strconv.FormatBool(k.Complete))
		}
		h2h = append(h2h, append(row, strconv.Itoa(r.FalseSuspicions), strconv.Itoa(r.Refuted)))
		for i, k := range []Kill{r.One, r.Spread, r.Adjacent} {
			for _, l := range k.Latencies {
				lat = append(lat, []string{string(r.System), strconv.Itoa(r.N), []string{"one", "spread", "adjacent"}[i], usStr(l)})
			}
		}
	}
	for _, f := range []struct {
		name   string
		header []string
		rows   [][]string
	}{
		{"imb_go.csv", imbHdr, imb(s.IMBGo)},
		{"imb_mpi.csv", imbHdr, imb(s.IMBMPI)},
		{"noise.csv", []string{"probe", "h_us", "pair", "detector_on", "noise_fraction", "samples", "max_detour_us", "p99_detour_le_ns", "pinned"}, rows},
		{"sweep_runs.csv", []string{"h_us", "placement", "pair", "detector_on", "load", "bytes", "t_min_us", "t_max_us", "t_avg_us",
			"false_suspicions", "missed_deadlines", "selfish_noise"}, sweep},
		{"sweep_overhead.csv", []string{"load", "bytes", "h_us", "placement", "off_tmax_us", "on_tmax_us", "overhead", "median_overhead", "band_rel",
			"significant", "false_suspicions"}, ov},
		{"accuracy.csv", []string{"load", "sched_fifo", "h_us", "delta_us", "false_suspicions", "ranks_suspected", "missed_deadlines",
			"max_late_us", "fifo_granted", "evicted"}, acc},
		{"rtprocess.csv", onOffHdr("process_fifo_asked"), rtp},
		{"lateness.csv", []string{"load", "h_us", "round", "variant", "fifo_granted", "wakeups", "missed_deadlines", "max_late_us",
			"gcs", "steal_us"}, late},
		{"cost.csv", []string{"transport", "h_us", "n", "delta_us", "check_us", "side", "round", "rank", "vigil_heartbeat",
			"window_us", "cpu_ns", "emitter_ns", "ctx_switches", "cpu_us_per_period", "ctx_switches_per_period", "core_fraction",
			"run_suspicions", "run_suspicions_at_stop", "run_missed_deadlines", "run_lost", "run_other_load_cores", "run_steal_us", "emitter_found_by"}, cost},
		{"sched.csv", []string{"h_us", "sched_fifo", "source", "window_us", "detector_cpu_ns", "emitter_cpu_ns", "app_cpu_ns",
			"preemptions", "taken_ns", "runq_p50_le_ns", "runq_p99_le_ns", "runq_max_le_ns", "emitter_wait_ns", "emitter_slices",
			"false_suspicions", "emitter_found_by", "fallback_reason"}, sched},
		{"h2h.csv", []string{"system", "n", "period_us", "msgs_per_period", "bytes_per_period", "one_first_us", "one_stable_us",
			"one_complete", "spread_first_us", "spread_stable_us", "spread_complete", "adjacent_first_us", "adjacent_stable_us",
			"adjacent_complete", "false_suspicions", "refuted"}, h2h},
		{"h2h_latency.csv", []string{"system", "n", "kill", "latency_us"}, lat},
	} {
		if err := write(f.name, f.header, f.rows); err != nil {
			return names, err
		}
	}
	return names, nil
}

// PlotSize is the message size the overhead plots show: the first
// non-zero sweep size (0 B collectives are no-ops in some MPI libraries).
func (s *Suite) PlotSize() int {
	for _, r := range s.Overheads {
		if r.Size > 0 {
			return r.Size
		}
	}
	return 0
}

func durStr(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return d.Round(time.Microsecond).String()
}

// Summary renders the markdown summary of what ran.
func (s *Suite) Summary(files []string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	host, _ := os.Hostname()
	p("# Vigil benchmark summary (%s profile)\n\n", s.Profile.Name)
	p("Generated by `%s` on %s (%d CPUs, %s/%s, %s), started %s, %v in all.\n\n", s.Command, host, runtime.NumCPU(),
		runtime.GOOS, runtime.GOARCH, runtime.Version(), s.Started.UTC().Format(time.RFC3339), time.Since(s.Started).Round(time.Second))
	p("**Caveat:** the machine is shared (other jobs run beside the benchmark on 2 cores), so every latency here is noisy; " +
		"read the overheads against the variability band, and treat the quick profile's small samples as indicative.\n\n")
	if len(s.Errors) > 0 {
		p("## Parts that failed\n\n")
		for _, k := range allParts() {
			if e, ok := s.Errors[k]; ok {
				p("- %s: `%s`\n", k, strings.ReplaceAll(e, "\n", " "))
			}
		}
		p("\n")
	}
	p("Part durations:")
	for _, k := range allParts() {
		if d, ok := s.Durations[k]; ok {
			p(" %s %v;", k, d.Round(100*time.Millisecond))
		}
	}
	p("\n\n")

	if len(s.IMBGo)+len(s.IMBMPI) > 0 {
		p("## IMB-style loads (no detector)\n\n%d ranks; t_max in µs per repetition (PingPong: half a round trip).\n\n", s.Profile.IMBRanks)
		p("| load | bytes | Go over Vigil TCP | Open MPI (C) |\n|---|---:|---:|---:|\n")
		mpi := map[[2]int]Result{}
		for _, r := range s.IMBMPI {
			mpi[[2]int{slices.Index(Loads, r.Load), r.Size}] = r
		}
		seen := map[[2]int]bool{}
		for _, r := range append(slices.Clone(s.IMBGo), s.IMBMPI...) {
			k := [2]int{slices.Index(Loads, r.Load), r.Size}
			if seen[k] {
				continue
			}
			seen[k] = true
			g, m := "—", "—"
			for _, x := range s.IMBGo {
				if x.Load == r.Load && x.Size == r.Size {
					g = usStr(x.TMax)
				}
			}
			if x, ok := mpi[k]; ok {
				m = usStr(x.TMax)
			}
			p("| %s | %d | %s | %s |\n", r.Load, r.Size, g, m)
		}
		p("\n")
	}
	if len(s.Noise) > 0 {
		p("## CPU noise probes (pinned to CPU 0, GC off), stand-alone detector of 2 agents off/on, interleaved\n\n")
		p("Noise = fraction of the CPU the probe did not get, mean ± σ over the runs; on this shared machine most of it " +
			"comes from the other jobs, so compare on with off.\n\n")
		p("| probe | h | noise off | noise on | on − off | max detour off / on |\n|---|---|---:|---:|---:|---:|\n")
		type key struct {
			p Probe
			h time.Duration
		}
		var keys []key
		vals := map[key][2][]float64{}
		maxd := map[key][2]time.Duration{}
		for _, r := range s.Noise {
			k := key{r.Probe, r.H}
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
			i := 0
			if r.On {
				i = 1
			}
			v, m := vals[k], maxd[k]
			v[i] = append(v[i], r.Noise)
			m[i] = max(m[i], r.MaxDetour)
			vals[k], maxd[k] = v, m
		}
		for _, k := range keys {
			off, on := Summarize(vals[k][0]), Summarize(vals[k][1])
			p("| %s | %v | %.2f ± %.2f %% | %.2f ± %.2f %% | %+.2f %% | %v / %v |\n", k.p, k.h, 100*off.Mean, 100*off.Std,
				100*on.Mean, 100*on.Std, 100*(on.Mean-off.Mean), maxd[k][0].Round(time.Microsecond), maxd[k][1].Round(time.Microsecond))
		}
		p("\n")
	}
	if len(s.Overheads) > 0 {
		size := s.PlotSize()
		p("## Noise sweep: overhead on t_max, %d B messages\n\n", size)
		p("Overhead = (on − off) / off of the mean t_max of %d interleaved off/on pairs per cell; δ = 10h. "+
			"Band = ± relative σ of all off runs of that load; a value inside it is not distinguishable from noise "+
			"(marked ·, outside: *); \"med\" is the same overhead on medians, robust to one disturbed run. Full table: sweep_overhead.csv; plots: overhead_<load>.png.\n\n", s.Profile.SweepPairs)
		var hs []time.Duration
		for _, r := range s.Overheads {
			if !slices.Contains(hs, r.H) {
				hs = append(hs, r.H)
			}
		}
		slices.Sort(hs)
		p("| load | placement | band |")
		for _, h := range hs {
			p(" h=%v |", h)
		}
		p("\n|---|---|---:|%s\n", strings.Repeat("---:|", len(hs)))
		for _, l := range Loads {
			for _, pl := range []Placement{InProcess, StandAlone} {
				cells := map[time.Duration]OverheadRow{}
				var band float64
				for _, r := range s.Overheads {
					if r.Load == l && r.Placement == pl && r.Size == size {
						cells[r.H], band = r, r.Band.Rel
					}
				}
				if len(cells) == 0 {
					continue
				}
				p("| %s | %s | ±%.1f %% |", l, pl, 100*band)
				for _, h := range hs {
					c, ok := cells[h]
					switch {
					case !ok || math.IsNaN(c.Overhead):
						p(" — |")
					default:
						mark := "·"
						if c.Significant {
							mark = "*"
						}
						p(" %+.1f %% %s (med %+.1f %%) |", 100*c.Overhead, mark, 100*c.MedianOverhead)
					}
				}
				p("\n")
			}
		}
		for _, pl := range []Placement{InProcess, StandAlone} {
			p("| all loads and sizes | %s | median of cells |", pl)
			for _, h := range hs {
				var xs []float64
				for _, r := range s.Overheads {
					if r.Placement == pl && r.H == h && !math.IsNaN(r.MedianOverhead) {
						xs = append(xs, r.MedianOverhead)
					}
				}
				if len(xs) == 0 {
					p(" — |")
					continue
				}
				p(" med %+.1f %% |", 100*Quantile(xs, 0.5))
			}
			p("\n")
		}
		susp := 0
		for _, r := range s.SweepRuns {
			susp += r.Suspicions
		}
		p("\nFalse suspicions during all detector-on sweep runs: %d.\n\n", susp)
	}
	if len(s.Verdicts) > 0 {
		p("## Accuracy sweep (seed 000 §5.3): δ = 10h, h lowered until the first false suspicion\n\n")
		p("%d stand-alone detector ranks; each step runs its load for %v after a %v start-up grace. "+
			"\"compute\" = one CPU burner per CPU; the IMB loads run on 2 MPI ranks in a loop.\n\n", s.Profile.AccuracyRanks,
			s.Profile.AccuracyDuration, accuracyGrace)
		p("| load | emitter | smallest safe h | first unsafe h | missed deadlines (all steps) | worst lateness |\n|---|---|---:|---:|---:|---:|\n")
		for _, v := range s.Verdicts {
			var missed uint64
			var late time.Duration
			for _, r := range s.Accuracy {
				if r.Load == v.Load && r.RealTime == v.RealTime {
					missed += r.Missed
					late = max(late, r.MaxLate)
				}
			}
			em := "normal priority"
			if v.RealTime {
				em = "SCHED_FIFO asked"
				if !v.RealTimeGranted {
					em += " (refused)"
				}
			}
			safe := durStr(v.SmallestSafe)
			if v.SmallestSafe == 0 {
				safe = "none tried was safe"
			}
			p("| %s | %s | %s | %s | %d | %v |\n", v.Load, em, safe, durStr(v.FirstUnsafe), missed, late.Round(time.Microsecond))
		}
		p("\n(— in \"first unsafe\": no h tried gave a false suspicion, so the smallest safe h is at most the smallest tried.)\n\n")
	}
	if len(s.RTProcess) > 0 {
		p("## Whole agent SCHED_FIFO: on against off\n\n")
		p("The same steps (%d stand-alone agents, SCHED_FIFO emitter asked, δ = 10h, %v per step) with every "+
			"thread of each agent SCHED_FIFO (-realtime-process: receive path, checks and the Go runtime's threads at "+
			"priority 1, the emitter at 2) or only the emitter, alternately. Granted: agents that ran wholly under "+
			"SCHED_FIFO in the steps asking for it.\n\n", s.Profile.AccuracyRanks, s.Profile.AccuracyDuration)
		onOffTable(p, s.RTProcess, "process FIFO", "emitter only", "granted", func(g GuardSummary) string {
			return fmt.Sprintf("%d of %d", g.ProcessRTOn, g.Rounds*s.Profile.AccuracyRanks)
		})
	}
	if len(s.Lateness) > 0 {
		p("## Emitter lateness: the Go emitter against a C loop\n\n")
		p("The same timer loop (timerfd, absolute deadlines, SCHED_FIFO priority 1 asked) run alone for %v, in turn: "+
			"in C with no runtime (bench/csrc/lateness.c), as Vigil's emitter (heartbeat.Emitter as the agent runs it, "+
			"sending nothing), and as Vigil's emitter in a process allocating %d MB/s (a Go application with the detector "+
			"inside). %d rounds, order rotated each round; medians over rounds. Compute: one burner per CPU. What the C loop "+
			"shows is the kernel's and the machine's share of a heartbeat's lateness; the rest is the Go runtime's. Steal: CPU "+
			"time the hypervisor took from this virtual machine during the rounds (/proc/stat, 10 ms ticks).\n\n",
			s.Profile.LatenessDuration, latGarbageMBps, s.Profile.LatenessRounds)
		p("| load | h | loop | FIFO | missed deadlines per 1,000 periods | worst lateness (median) | worst of all rounds | ÷ C loop | GCs | steal |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|\n")
		for _, l := range SummarizeLateness(s.Lateness) {
			fifo := "yes"
			if !l.FIFO {
				fifo = "refused"
			}
			steal := "?"
			if l.Steal >= 0 {
				steal = l.Steal.String()
			}
			p("| %s | %v | %s | %s | %.1f | %v | %v | %.1f | %d | %s |\n", l.Load, l.H, l.Variant, fifo, l.MissedPerK,
				l.MedianMax.Round(time.Microsecond), l.WorstMax.Round(time.Microsecond), l.MaxOverC, l.GCs, steal)
		}
		p("\n")
	}
	if len(s.Cost) > 0 {
		p("## Detector cost: CPU per heartbeat period per process, Vigil against a C reference\n\n")
		p("Each round runs, in turn (order rotated every round), N processes of the C reference (bench/csrc/hbcost.c: one "+
			"thread that sleeps on absolute deadlines every h, sends one %d-byte datagram to its observer over UDP or stores a "+
			"word in shared memory, and every check period drains its socket with recvmmsg or loads its word), N Vigil agents "+
			"(`vigil agent`, SCHED_FIFO emitter asked, the agent's default) and, when the profile asks, N host processes that "+
			"only run libvigil's detector (bench/csrc/hbhost.c), all with the same h, δ = max(10h, 100 ms) and check period "+
			"δ/10. After a warm-up of ≥ 1 s each process is sampled over a window of ≥ 200 periods and ≥ 2 s (at most %v): "+
			"on-CPU time summed over its threads' schedstat, context switches over their status. Cells are medians over "+
			"processes and rounds; ÷ C is the median of the rounds' ratios of medians. Heartbeats: the C reference's transport; "+
			"for the agents what they were passed as -heartbeat (\"agent default\": the flag was not passed). Emitter / rest: "+
			"the heartbeat thread (the SCHED_FIFO thread, else the one with the most voluntary switches) and the other "+
			"threads. Suspicions: false ones before the stop; \"at stop\": an agent's crash reports printed once the ranks "+
			"had been told to leave at once. Lost: processes that exited before the window closed. Other load: CPU the "+
			"rest of the machine (this harness included) used during the windows, in cores (non-idle time from /proc/stat "+
			"less the sampled processes' own, ±0.1; median and largest over rounds); rounds run beside other work are not "+
			"comparable. Raw samples: cost.csv.\n\n",
			wire.HeartbeatFrameSize, max(s.Profile.CostMaxWindow, s.Profile.CostWindow))
		CostTable(p, s.Cost)
		p("\n")
	}
	if len(s.Sched) > 0 {
		p("## Scheduler attribution: stand-alone detector (2 agents) beside one CPU burner per CPU\n\n")
		p("| h | emitter | source | detector CPU | of which emitter | preemptions of the app | CPU taken from the app | emitter run-queue p50 ≤ | p99 ≤ | max ≤ | false suspicions |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, r := range s.Sched {
			em := "normal"
			if r.RealTime {
				em = "FIFO"
			}
			q := func(x float64) string {
				if r.Source != "ebpf" {
					return "—"
				}
				return time.Duration(r.EmitterRunq.Quantile(x)).String()
			}
			p("| %v | %s | %s | %.2f ms / %v | %.2f ms | %d | %.2f ms | %s | %s | %s | %d |\n", r.H, em, r.Source,
				float64(r.DetectorCPU)/1e6, r.Duration, float64(r.EmitterCPU)/1e6, r.Preemptions, float64(r.StolenNs)/1e6,
				q(0.5), q(0.99), q(1), r.Suspicions)
		}
		for _, r := range s.Sched {
			if r.Source != "ebpf" {
				p("\nFallback to /proc schedstat (no preemption counts nor histogram): %s\n", r.Why)
				break
			}
		}
		p("\n")
	}
	if len(s.H2H) > 0 {
		p("## Head-to-head: Vigil vs hashicorp/memberlist v0.7.0\n\n")
		p("Same period %v: Vigil h = %v, δ = 5×h; memberlist ProbeInterval = %v, ProbeTimeout = period/2, other LAN defaults. "+
			"kill -9 of one rank; then of %d ranks at once, spread over the ring (no two neighbours); and, in a fresh job, of %d "+
			"adjacent ranks (1, 2, …: the observation ring's worst case, where Vigil reconnects one failure after the other; "+
			"seed 000's Theorem 1 bounds it by T(f) ≥ f(f+1)δ, i.e. 12δ for f = 3); each kill at a random phase of the period. Each cell is first report / last survivor "+
			"knows every victim (stabilization), from the kill, on CLOCK_MONOTONIC. Traffic: payload messages and bytes sent by all "+
			"members per period, without TCP/UDP/IP headers.\n\n",
			s.Profile.H2HPeriod, s.Profile.H2HPeriod, s.Profile.H2HPeriod, s.Profile.H2HSeveral, s.Profile.H2HSeveral)
		p("| system | N | one kill | %d spread | %d adjacent | msgs/period | bytes/period | false suspicions under burners |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
			s.Profile.H2HSeveral, s.Profile.H2HSeveral)
		cell := func(k Kill) string {
			c := durStr(k.First) + " / " + durStr(k.Stable)
			if !k.Complete {
				c += " (incomplete)"
			}
			return c
		}
		for _, r := range s.H2H {
			p("| %s | %d | %s | %s | %s | %.1f | %.0f | %d |\n", r.System, r.N, cell(r.One), cell(r.Spread), cell(r.Adjacent),
				r.MsgsPerPeriod, r.BytesPerPeriod, r.FalseSuspicions)
		}
		for _, r := range s.H2H {
			for i, k := range []Kill{r.One, r.Spread, r.Adjacent} {
				if len(k.Missing) > 0 {
					p("\n%s N=%d, %s kill of ranks %v: reports never received within %v (survivor, victim): %v.", r.System, r.N,
						[]string{"one", "spread", "adjacent"}[i], k.Victims, s.Profile.H2HWait, k.Missing)
					if f := len(k.Victims); r.System == Vigil && f > hb.MaxOverlapping(r.N) {
						p(" %d overlapping failures exceed what seed 000's Theorem 1 covers at N = %d (⌊log2 N⌋ − 1 = %d).",
							f, r.N, hb.MaxOverlapping(r.N))
					}
					p("\n")
				}
			}
		}
		p("\nPlots: detection_cdf.png, h2h.png.\n\n")
	}
	if len(files) > 0 {
		p("Files in `%s`: %s.\n", s.Out, strings.Join(files, ", "))
	}
	return b.String()
}

// onOffTable writes the table of an on/off comparison (SummarizeGuard of
// rows): on and off name the two settings; extra heads the column that
// extraCol fills.
func onOffTable(p func(string, ...any), rows []GuardRow, on, off, extra string, extraCol func(GuardSummary) string) {
	p("| load | h | steps | unsafe steps, %s | unsafe steps, %s | false suspicions on / off | %s | missed deadlines on / off |\n"+
		"|---|---:|---:|---:|---:|---:|---:|---:|\n", on, off, extra)
	for _, g := range SummarizeGuard(rows) {
		p("| %s | %s | %d + %d | %d | %d | %d / %d | %s | %d / %d |\n", g.Load, durStr(g.H), g.Rounds, g.Rounds,
			g.UnsafeOn, g.UnsafeOff, g.SuspOn, g.SuspOff, extraCol(g), g.MissedOn, g.MissedOff)
	}
	p("\n")
}
