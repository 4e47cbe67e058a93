package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// Options a GuardConfig can compare, on against off.
const (
	// OptionRTProcess is the whole agent real-time (SCHED_RR)
	// (node.Config.RealTimeProcess) against the heartbeat thread alone.
	OptionRTProcess = "rt-process"
)

// GuardConfig configures an on/off comparison of one option: accuracy
// steps (stand-alone agents, δ = 10h, one load) run with the option on and
// off, alternating on, off, off, on… so that machine drift falls on both
// alike.
type GuardConfig struct {
	// Option is OptionRTProcess (the default when empty).
	Option   string
	VigilBin string
	MPI      MPIBuild
	// Ranks is the number of agents; Hs the heartbeat periods tried.
	Ranks int
	Hs    []time.Duration
	// Duration is how long each step runs its load; Rounds how many
	// on/off pairs run per load and h.
	Duration time.Duration
	Rounds   int
	// Loads are Compute or IMB load names (as in AccuracyConfig).
	Loads []string
	Sizes []int
	// RealTime asks for a SCHED_FIFO emitter: heartbeats then leave on
	// time, and what remains of false suspicions comes from the receive
	// path and the observer.
	RealTime bool
	Log      io.Writer
}

// GuardRow is one step: one load, h and setting of the option, in round
// Round.
type GuardRow struct {
	Option string
	Load   string
	H      time.Duration
	Delta  time.Duration
	Round  int
	On     bool
	AgentReport
}

// Guard runs the comparison and returns every step.
func Guard(ctx context.Context, cfg GuardConfig) ([]GuardRow, error) {
	if cfg.Option == "" {
		cfg.Option = OptionRTProcess
	}
	if cfg.Option != OptionRTProcess {
		return nil, fmt.Errorf("bench: option %q: want %s", cfg.Option, OptionRTProcess)
	}
	acfg := AccuracyConfig{VigilBin: cfg.VigilBin, MPI: cfg.MPI, Ranks: cfg.Ranks, Duration: cfg.Duration, Sizes: cfg.Sizes}
	var rows []GuardRow
	for _, load := range cfg.Loads {
		if err := checkLoad(load); err != nil {
			return rows, err
		}
		for _, h := range cfg.Hs {
			for round := range cfg.Rounds {
				for _, on := range []bool{round%2 == 0, round%2 != 0} { // on first in even rounds
					if err := ctx.Err(); err != nil {
						return rows, err
					}
					spec := DetectorSpec{H: h, Delta: 10 * h, RealTime: cfg.RealTime, RealTimeProcess: on}
					st, err := accuracyStep(ctx, acfg, load, spec)
					if err != nil {
						return rows, fmt.Errorf("%s %s h=%v: %w", cfg.Option, load, h, err)
					}
					rows = append(rows, GuardRow{Option: cfg.Option, Load: load, H: h, Delta: spec.Delta, Round: round, On: on,
						AgentReport: st.AgentReport})
					if cfg.Log != nil {
						fmt.Fprintf(cfg.Log, "%s %-9s h=%-6v round %d on=%-5v false suspicions %d, evicted %d, held checks %d, missed deadlines %d, whole-process FIFO %d\n",
							cfg.Option, load, h, round, on, st.Suspicions, st.Evicted, st.Held, st.Missed, st.ProcessRT)
					}
				}
			}
		}
	}
	return rows, nil
}

// GuardSummary is the comparison for one load and h: over the rounds, the
// steps with a false suspicion (or an eviction) and the suspicions, with
// the guard on and off, and the checks the guard held.
type GuardSummary struct {
	Load                string
	H                   time.Duration
	Rounds              int
	UnsafeOn, UnsafeOff int
	SuspOn, SuspOff     int
	HeldOn              uint64
	MissedOn, MissedOff uint64
	// ProcessRTOn counts the agents that ran wholly real-time in
	// the steps with the option on (OptionRTProcess).
	ProcessRTOn int
}

// SummarizeGuard groups rows by load and h, in the order they ran.
func SummarizeGuard(rows []GuardRow) []GuardSummary {
	type cell struct {
		load string
		h    time.Duration
	}
	var out []GuardSummary
	idx := map[cell]int{}
	for _, r := range rows {
		key := cell{r.Load, r.H}
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, GuardSummary{Load: r.Load, H: r.H})
		}
		g := &out[i]
		g.Rounds = max(g.Rounds, r.Round+1)
		unsafe := 0
		if r.Suspicions > 0 || r.Evicted > 0 {
			unsafe = 1
		}
		if r.On {
			g.UnsafeOn += unsafe
			g.SuspOn += r.Suspicions
			g.HeldOn += r.Held
			g.MissedOn += r.Missed
			g.ProcessRTOn += r.ProcessRT
		} else {
			g.UnsafeOff += unsafe
			g.SuspOff += r.Suspicions
			g.MissedOff += r.Missed
		}
	}
	return out
}
