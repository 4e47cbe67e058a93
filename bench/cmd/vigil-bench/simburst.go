package main

import (
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/sim"
)

// burstHostSize is the ranks per host of the burst study's placement.
const burstHostSize = 32

// burstConfig is the burst study's detector at n ranks: the runtime's
// defaults (node.Config: h = 10 ms, δ = 5h, checks every max(δ/8, h),
// block mending W = 16 with hb.EarlyProbeAfter), host labels, every
// heartbeat and check simulated, on LogP with receive contention.
func burstConfig(n int, o time.Duration, plan sim.FailurePlan) sim.DetectorConfig {
	h, delta := 10*time.Millisecond, 50*time.Millisecond
	check := max(delta/8, h)
	return sim.DetectorConfig{N: n, H: int64(h), Delta: int64(delta), Check: int64(check),
		Net:        sim.LogP{L: int64(2 * time.Microsecond), O: int64(o), G: int64(o), RecvContention: true},
		Heartbeats: sim.HeartbeatsFull, Failures: plan, Probe: 16, ProbeAfter: hb.EarlyProbeAfter(int64(delta), int64(check)),
		Hosts: sim.HostCrash{HostSize: burstHostSize}.Placement(n), Horizon: int64(100 * delta),
		Partition: detector.PartitionContinue} // the minority side of a cut studied as a crash of the rest
}

// burstKinds are the bursts of the study, as -bursts names them, in
// sim.BurstPlans's order.
var burstKinds = []string{"random", "hosts", "majority", "minority"}

// burstLight is the most rank-broadcasts (broadcasts × ranks reached) a
// row's run may cost without -heavy: about 4.5 million, each reaching a
// rank about 9 times over HBA, a minute of one core.
const burstLight = 4_500_000

// burstWeight estimates the rank-broadcasts of one run: a broadcast per
// random rank, about two per host, about two per round of a cut's
// doubling probe rounds (to the ranks of the side that sees them).
func burstWeight(n int, plan string, frac float64) int {
	k := max(1, int(frac*float64(n)+0.5))
	hosts := max(1, (k+burstHostSize/2)/burstHostSize)
	m := hosts * burstHostSize
	switch plan {
	case "random":
		return k * n
	case "hosts":
		return 2 * hosts * n
	case "cut, majority":
		return 2 * bits.Len(uint(m)) * n
	}
	return 2 * bits.Len(uint(n)) * m
}

func simBurst(o *simOpts) error {
	var fracs []float64
	for _, f := range strings.Split(o.fracs, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || x <= 0 || x >= 1 {
			return fmt.Errorf("sim burst: bad fraction %q in -fractions (want numbers in (0, 1))", f)
		}
		fracs = append(fracs, x)
	}
	if o.recvO <= 0 {
		return fmt.Errorf("sim burst: -recv-o must be positive")
	}
	kinds := map[string]bool{}
	for _, k := range strings.Split(o.bursts, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(burstKinds, k) {
			return fmt.Errorf("sim burst: unknown burst %q in -bursts (want some of %s)", k, strings.Join(burstKinds, ", "))
		}
		kinds[k] = true
	}
	ns, runs := []int{1024, 4096, 16384, 65536}, o.runsOr(2)
	if o.quick {
		ns, runs = []int{256}, o.runsOr(2)
	}
	ns = o.sizes(ns)
	type row struct {
		n    int
		name string
		frac float64
		plan sim.FailurePlan
	}
	var rows []row
	total := 0
	var heavy []string
	for _, n := range ns {
		names, fs, plans := sim.BurstPlans(n, burstHostSize, fracs)
		for i := range plans {
			if !kinds[burstKinds[i%len(burstKinds)]] {
				continue
			}
			r := row{n, names[i], fs[i], plans[i]}
			if burstWeight(r.n, r.name, r.frac) > burstLight && !o.heavy {
				heavy = append(heavy, fmt.Sprintf("n=%d %s %g%%", n, r.name, 100*r.frac))
				continue
			}
			rows = append(rows, r)
			total += runs * burstWeight(r.n, r.name, r.frac)
		}
	}
	if len(heavy) > 0 && !o.quiet {
		fmt.Fprintf(o.stderr, "burst: not run without -heavy (over %d rank-broadcasts a run): %s\n", burstLight, strings.Join(heavy, ", "))
	}
	if len(rows) == 0 {
		return fmt.Errorf("sim burst: no n of %v within -minn %d and -maxn %d", []int{1024, 4096, 16384, 65536}, o.minN, o.maxN)
	}
	bar := newBar(o, "burst", total)
	w, err := newCSV(o, "burst.csv", "plan", "n", "fraction", "runs", "killed", "lost_max", "false_suspicions", "evicted",
		"all_known_s", "all_known_max_s", "stabilized_s", "stabilized_max_s", "incomplete", "unstable", "detections",
		"msgs_per_survivor", "bcast_msgs", "newobserver_msgs", "probe_msgs", "sync_msgs", "other_msgs", "events")
	if err != nil {
		return err
	}
	var all []sim.BurstStats
	for _, r := range rows {
		start := time.Now()
		st, err := sim.BurstStudy(burstConfig(r.n, o.recvO, r.plan), r.name, r.frac, runs, o.workers, o.seed, func() { bar.add(burstWeight(r.n, r.name, r.frac)) })
		if err != nil {
			return err
		}
		if !o.quiet {
			fmt.Fprintf(o.stderr, "burst n=%d %s %.0f%%: %v\n", r.n, r.name, 100*r.frac, time.Since(start).Round(time.Second))
		}
		all = append(all, st)
		w.row(st.Plan, st.N, st.Fraction, st.Runs, st.Killed, st.Lost, st.FalseSuspicions, st.Evicted,
			st.AllKnown, st.AllKnownMax, st.Stabilized, st.StabilizedMax, st.Incomplete, st.Unstable, st.Detections,
			st.MsgsPerSurvivor, st.BcastMsgs, st.NewObserverMsgs, st.ProbeMsgs, st.SyncMsgs, st.OtherMsgs, st.Events)
	}
	bar.finish()
	if err := w.close(); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(o.out, "burst.md"))
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	var out io.Writer = f
	if !o.quiet {
		out = io.MultiWriter(f, o.stdout)
	}
	burstTable(out, o.recvO, all)
	return f.Close()
}

// burstTable writes the markdown table of the burst study.
func burstTable(w io.Writer, recvO time.Duration, all []sim.BurstStats) {
	fmt.Fprintf(w, "LogP L = 2 µs, o = g = %v, receive contention; h = 10 ms, δ = 50 ms, checks every 10 ms, W = 16, early probes at 15 ms, hosts of %d.\n\n", recvO, burstHostSize)
	fmt.Fprint(w, "| n | burst | share | runs | taken out | lost (max) | false suspicions | all know, s: mean (max) | stable, s: mean (max) | "+
		"incomplete | broadcasts | msgs / survivor | broadcast | NEWOBSERVER | PROBE/ALIVE | SYNC | EVICTED |\n"+
		"|---:|---|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, st := range all {
		known, stable := "—", "—"
		if st.Incomplete < st.Runs {
			known = fmt.Sprintf("%.3f (%.3f)", st.AllKnown, st.AllKnownMax)
		}
		if st.Unstable < st.Runs {
			stable = fmt.Sprintf("%.3f (%.3f)", st.Stabilized, st.StabilizedMax)
		}
		fmt.Fprintf(w, "| %d | %s | %g %% | %d | %d | %d | %d | %s | %s | %d | %.1f | %.1f | %.3g | %.3g | %.3g | %.3g | %.3g |\n",
			st.N, st.Plan, 100*st.Fraction, st.Runs, st.Killed, st.Lost, st.FalseSuspicions, known, stable, st.Incomplete,
			st.Detections, st.MsgsPerSurvivor, st.BcastMsgs, st.NewObserverMsgs, st.ProbeMsgs, st.SyncMsgs, st.OtherMsgs)
	}
}
