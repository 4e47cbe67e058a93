package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/internal/mono"
	"github.com/vigil-hpc/vigil/launch"
)

// HostCrashConfig is the host-crash benchmark (issue #13): N agents, a
// block of consecutive ranks killed at once (one host), the time until
// every survivor knows every rank of the block, with block mending and
// with Algorithm 1's one-at-a-time mending, interleaved run by run.
type HostCrashConfig struct {
	VigilBin string
	// N agents; ranks First … First+Block−1 are killed.
	N, First, Block int
	// H and Delta are the detector's timing.
	H, Delta time.Duration
	// Probes are the -mend-probe values compared (0: Algorithm 1).
	Probes []int
	// Late also runs each block-mending value with its probes at the
	// suspicion (-mend-early < 0) rather than early (the default,
	// node.Config.MendEarly).
	Late bool
	// RanksPerHost and Labelled: each -mend-probe value of Labelled also
	// runs with the agents told a placement of RanksPerHost ranks per
	// pretended host (VIGIL_RANKS_PER_HOST, host-aware block mending).
	RanksPerHost int
	Labelled     []int
	// Runs per value.
	Runs int
	Log  io.Writer
}

// HostCrashRow is one run.
type HostCrashRow struct {
	Probe, Run int
	// Late: the probes went out at the suspicion, not before it.
	Late bool
	// Labelled: the agents knew the pretended hosts.
	Labelled bool
	// KnownAfter is the time from the kill until the last survivor knew
	// the last rank of the block (0 when incomplete).
	KnownAfter time.Duration
	// Complete: every survivor reported every rank of the block; False
	// counts reports of live ranks.
	Complete bool
	False    int
}

// HostCrash runs the benchmark.
func HostCrash(ctx context.Context, cfg HostCrashConfig) ([]HostCrashRow, error) {
	var rows []HostCrashRow
	for run := range cfg.Runs {
		for _, v := range hostCrashVariants(cfg) {
			if ctx.Err() != nil {
				return rows, ctx.Err()
			}
			row, err := hostCrashRun(cfg, v)
			if err != nil {
				return rows, fmt.Errorf("hostcrash %s run %d: %w", v.name(), run, err)
			}
			row.Run = run
			rows = append(rows, row)
			if cfg.Log != nil {
				fmt.Fprintf(cfg.Log, "hostcrash %s run=%d known after %v complete=%v false=%d\n",
					v.name(), run, row.KnownAfter.Round(time.Millisecond), row.Complete, row.False)
			}
		}
	}
	return rows, nil
}

// hostCrashVariants are the compared mendings, in run order.
func hostCrashVariants(cfg HostCrashConfig) []HostCrashRow {
	var vs []HostCrashRow
	for _, probe := range cfg.Probes {
		vs = append(vs, HostCrashRow{Probe: probe})
		if probe > 0 && cfg.Late {
			vs = append(vs, HostCrashRow{Probe: probe, Late: true})
		}
		if probe > 0 && cfg.RanksPerHost > 0 && slices.Contains(cfg.Labelled, probe) {
			vs = append(vs, HostCrashRow{Probe: probe, Labelled: true})
		}
	}
	return vs
}

// name names the mending of a variant in the logs and the table.
func (v HostCrashRow) name() string {
	switch {
	case v.Probe == 0:
		return "Algorithm 1"
	case v.Late:
		return fmt.Sprintf("block, W=%d, probes at the suspicion", v.Probe)
	case v.Labelled:
		return fmt.Sprintf("block, W=%d, early probes, host labels", v.Probe)
	}
	return fmt.Sprintf("block, W=%d, early probes", v.Probe)
}

func hostCrashRun(cfg HostCrashConfig, v HostCrashRow) (HostCrashRow, error) {
	row := HostCrashRow{Probe: v.Probe, Late: v.Late, Labelled: v.Labelled}
	argv := []string{cfg.VigilBin, "agent", "-h", cfg.H.String(), "-delta", cfg.Delta.String(),
		"-grace", (2 * cfg.Delta).String(), fmt.Sprintf("-mend-probe=%d", v.Probe)}
	if v.Late {
		argv = append(argv, "-mend-early=-1ns")
	}
	var opts launch.Options
	if v.Labelled {
		opts.ExtraEnv = []string{fmt.Sprintf("%s=%d", bootstrap.EnvRanksPerHost, cfg.RanksPerHost)}
	}
	a, err := startJob(cfg.N, argv, opts)
	if err != nil {
		return row, err
	}
	time.Sleep(4*cfg.Delta + 200*time.Millisecond) // past the start-up grace
	dead := map[uint32]bool{}
	for i := range cfg.Block {
		dead[uint32((cfg.First+i)%cfg.N)] = true
	}
	killed := mono.Now()
	for r := range dead {
		if err := a.job.Signal(r, syscall.SIGKILL); err != nil {
			a.Stop()
			return row, err
		}
	}
	wait := time.Duration(2*cfg.Block+6) * cfg.Delta // Algorithm 1 needs about 2δ per rank
	time.Sleep(wait)
	a.job.Stop(5 * time.Second)
	<-a.done
	known := map[[2]uint32]int64{} // (reporter, dead) → when
	for _, l := range a.log {
		if l.Ev != "dead" || l.Left {
			continue
		}
		if !dead[l.Dead] {
			row.False++
			continue
		}
		known[[2]uint32{l.Rank, l.Dead}] = l.DeliveredMono
	}
	row.Complete = true
	var last int64
	for r := range uint32(cfg.N) {
		if dead[r] {
			continue
		}
		for d := range dead {
			at, ok := known[[2]uint32{r, d}]
			if !ok {
				row.Complete = false
				continue
			}
			last = max(last, at)
		}
	}
	if row.Complete {
		row.KnownAfter = time.Duration(last - killed)
	}
	return row, nil
}

// HostCrashTable prints, per probe value, the distribution of the time
// until every survivor knew the block, and the ratio of the medians.
func HostCrashTable(p func(string, ...any), cfg HostCrashConfig, rows []HostCrashRow) {
	p("Host crash: %d agents, ranks %d–%d killed at once, h=%v δ=%v, %d runs per row, interleaved\n\n",
		cfg.N, cfg.First, cfg.First+cfg.Block-1, cfg.H, cfg.Delta, cfg.Runs)
	p("| mending | complete | false reports | min | median | p90 | max |\n|---|---|---|---|---|---|---|\n")
	medians := map[string]time.Duration{}
	for _, v := range hostCrashVariants(cfg) {
		name := v.name()
		var ts []time.Duration
		complete, falses := 0, 0
		for _, r := range rows {
			if r.Probe != v.Probe || r.Late != v.Late || r.Labelled != v.Labelled {
				continue
			}
			falses += r.False
			if r.Complete {
				complete++
				ts = append(ts, r.KnownAfter)
			}
		}
		if len(ts) == 0 {
			p("| %s | 0 | %d | | | | |\n", name, falses)
			continue
		}
		slices.Sort(ts)
		q := func(f float64) time.Duration {
			return ts[min(len(ts)-1, int(f*float64(len(ts))))].Round(time.Millisecond)
		}
		medians[name] = q(0.5)
		p("| %s | %d of %d | %d | %v | %v | %v | %v |\n", name, complete, cfg.Runs, falses, ts[0].Round(time.Millisecond), q(0.5), q(0.9), ts[len(ts)-1].Round(time.Millisecond))
	}
	if a, ok := medians["Algorithm 1"]; ok {
		for _, v := range hostCrashVariants(cfg) {
			name := v.name()
			if m := medians[name]; v.Probe != 0 && m > 0 {
				p("\nmedian ratio Algorithm 1 / %s: %.2f", name, float64(a)/float64(m))
			}
		}
		p("\nbound 2δ + 50 ms = %v\n", 2*cfg.Delta+50*time.Millisecond)
	}
}
