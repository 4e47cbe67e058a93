package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Compute is the accuracy sweep's compute-only load: one CPU burner per CPU.
const Compute = "compute"

// AccuracyConfig configures the accuracy sweep of seed 000 §5.3: δ = 10h,
// h lowered step by step until the first false suspicion, under each load.
type AccuracyConfig struct {
	VigilBin string
	MPI      MPIBuild
	// Ranks is the number of detector ranks (stand-alone agents).
	Ranks int
	// Hs are tried in the order given (largest first).
	Hs []time.Duration
	// Duration is how long each step runs its load (after the agents'
	// start-up grace).
	Duration time.Duration
	// Loads are Compute or IMB load names; the IMB loads run on 2 MPI
	// ranks in a loop over Sizes.
	Loads []string
	Sizes []int
	// RealTime lists the emitter settings to try (SCHED_FIFO or not).
	RealTime []bool
	Log      io.Writer
}

// AccuracyRow is one step of the sweep.
type AccuracyRow struct {
	Load     string
	RealTime bool
	H, Delta time.Duration
	AgentReport
}

// Safe reports whether the step had no false suspicion.
func (r AccuracyRow) Safe() bool { return r.Suspicions == 0 && r.Evicted == 0 }

// AccuracyVerdict is the smallest safe h for a load and emitter setting.
type AccuracyVerdict struct {
	Load     string
	RealTime bool
	// SmallestSafe is the last h without a false suspicion before the
	// first one (0: even the largest h failed); FirstUnsafe the h that
	// failed (0: none did).
	SmallestSafe, FirstUnsafe time.Duration
	// RealTimeGranted says whether the emitters actually got SCHED_FIFO.
	RealTimeGranted bool
}

// accuracyGrace is the agents' start-up grace in the accuracy sweep.
const accuracyGrace = 500 * time.Millisecond

// Accuracy runs the sweep and returns every step and the verdicts.
func Accuracy(ctx context.Context, cfg AccuracyConfig) ([]AccuracyRow, []AccuracyVerdict, error) {
	var rows []AccuracyRow
	var verdicts []AccuracyVerdict
	for _, load := range cfg.Loads {
		if err := checkLoad(load); err != nil {
			return rows, verdicts, err
		}
		for _, rt := range cfg.RealTime {
			v := AccuracyVerdict{Load: load, RealTime: rt}
			for _, h := range cfg.Hs {
				if err := ctx.Err(); err != nil {
					return rows, verdicts, err
				}
				row, err := accuracyStep(ctx, cfg, load, DetectorSpec{H: h, Delta: 10 * h, RealTime: rt})
				if err != nil {
					return rows, verdicts, fmt.Errorf("accuracy %s h=%v: %w", load, h, err)
				}
				rows = append(rows, row)
				v.RealTimeGranted = row.FIFO > 0
				if cfg.Log != nil {
					fmt.Fprintf(cfg.Log, "accuracy %-9s fifo=%-5v h=%-6v δ=%-6v false suspicions %d, missed deadlines %d, worst lateness %v\n",
						load, rt, h, row.Delta, row.Suspicions, row.Missed, row.MaxLate)
				}
				if !row.Safe() {
					v.FirstUnsafe = h
					break
				}
				v.SmallestSafe = h
			}
			verdicts = append(verdicts, v)
		}
	}
	return rows, verdicts, nil
}

// checkLoad accepts Compute and the IMB load names.
func checkLoad(load string) error {
	if load == Compute {
		return nil
	}
	_, err := ParseLoad(load)
	return err
}

// accuracyStep runs cfg.Ranks agents configured by spec (its Grace set to
// accuracyGrace) for cfg.Duration under load.
func accuracyStep(ctx context.Context, cfg AccuracyConfig, load string, spec DetectorSpec) (AccuracyRow, error) {
	row := AccuracyRow{Load: load, RealTime: spec.RealTime, H: spec.H, Delta: spec.Delta}
	spec.Grace = accuracyGrace
	agents, err := StartAgents(cfg.VigilBin, cfg.Ranks, spec, nil)
	if err != nil {
		return row, err
	}
	end := time.Now().Add(accuracyGrace + cfg.Duration)
	if load == Compute {
		var b *Burners
		if b, err = StartBurners(0); err == nil {
			sleepCtx(ctx, time.Until(end))
			b.Stop()
		}
	} else {
		for err == nil && time.Now().Before(end) && ctx.Err() == nil {
			_, err = MPIRun{Bin: cfg.MPI.IMB, Ranks: 2, Loads: []Load{Load(load)}, Sizes: cfg.Sizes,
				TimeLimit: min(time.Until(end), time.Second) / time.Duration(max(len(cfg.Sizes), 1))}.Run(ctx)
		}
	}
	row.AgentReport = agents.Stop()
	return row, err
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
