package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/internal/mono"
	"github.com/vigil-hpc/vigil/launch"
)

// PropagationConfig is the propagation benchmark (issue #18): N agents
// over TCP, one rank killed with -9, for each -broadcast (overlays and
// corrected gossips) interleaved run by run: the time from the detection
// to the last survivor's delivery, and the messages the job sent for the
// failure.
type PropagationConfig struct {
	VigilBin   string
	Ns         []int
	Broadcasts []string
	// H and Delta are the detector's timing.
	H, Delta time.Duration
	// Extra flags for every agent (-gossip-step, say).
	Extra []string
	Runs  int
	Log   io.Writer
	// AgentLog, if set, receives the agents' standard error.
	AgentLog io.Writer
}

// PropagationRow is one run.
type PropagationRow struct {
	N         int
	Broadcast string
	Run       int
	// Spread is the time from the detector's delivery (the detection) to
	// the last survivor's; Detect from the kill to the detection.
	Spread, Detect time.Duration
	// Msgs counts the messages every survivor sent from just before the
	// kill until every survivor knew (the broadcast, the ring's
	// NEWOBSERVER and probes, the dead-list repair).
	Msgs uint64
	// Complete: every survivor reported the rank; False counts reports of
	// live ranks, Exited the live agents that exited before the stop
	// (evicted after a false report).
	Complete      bool
	False, Exited int
}

// Propagation runs the benchmark.
func Propagation(ctx context.Context, cfg PropagationConfig) ([]PropagationRow, error) {
	var rows []PropagationRow
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 18))
	for run := range cfg.Runs {
		for _, n := range cfg.Ns {
			for _, b := range cfg.Broadcasts {
				if ctx.Err() != nil {
					return rows, ctx.Err()
				}
				row, err := propagationRun(cfg, n, b, uint32(rng.IntN(n)))
				if err != nil {
					return rows, fmt.Errorf("propagation %s n=%d run %d: %w", b, n, run, err)
				}
				row.Run = run
				rows = append(rows, row)
				if cfg.Log != nil {
					fmt.Fprintf(cfg.Log, "propagation %s n=%d run=%d detect %v spread %v msgs %d complete=%v false=%d exited=%d\n",
						b, n, run, row.Detect.Round(100*time.Microsecond), row.Spread.Round(10*time.Microsecond), row.Msgs, row.Complete, row.False, row.Exited)
				}
			}
		}
	}
	return rows, nil
}

func propagationRun(cfg PropagationConfig, n int, b string, victim uint32) (PropagationRow, error) {
	row := PropagationRow{N: n, Broadcast: b}
	argv := append([]string{cfg.VigilBin, "agent", "-h", cfg.H.String(), "-delta", cfg.Delta.String(),
		"-grace", (2 * cfg.Delta).String(), "-broadcast", b}, cfg.Extra...)
	a, err := startJob(n, argv, launch.Options{Stderr: cfg.AgentLog})
	if err != nil {
		return row, err
	}
	time.Sleep(4*cfg.Delta + 300*time.Millisecond) // past the start-up grace
	exited := a.Exited()
	stats := func(skip int64) { // every live agent but skip prints a stats line
		for r := range uint32(n) {
			select {
			case <-exited[r]:
				continue
			default:
			}
			if int64(r) != skip {
				_ = a.job.Signal(r, syscall.SIGUSR1) // it may exit meanwhile
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	stats(-1)
	killed := mono.Now()
	if err := a.job.Signal(victim, syscall.SIGKILL); err != nil {
		a.Stop()
		return row, err
	}
	time.Sleep(6*cfg.Delta + 500*time.Millisecond)
	after := mono.Now()
	stats(int64(victim))
	for r := range uint32(n) {
		select {
		case <-exited[r]:
			if r != victim {
				row.Exited++
			}
		default:
		}
	}
	a.job.Stop(5 * time.Second)
	<-a.done
	before := map[uint32]uint64{}
	var at []int64 // survivors' deliveries
	var first int64
	for _, l := range a.log {
		switch {
		case l.Ev == "stats" && l.Mono < killed:
			before[l.Rank] = l.MsgsSent
		case l.Ev == "stats" && l.Mono > after && l.Rank != victim:
			if b, ok := before[l.Rank]; ok && l.MsgsSent >= b {
				row.Msgs += l.MsgsSent - b
			}
			delete(before, l.Rank) // the first line after: not SIGTERM's
		case l.Ev != "dead" || l.Left || l.Mono > after: // the clean departures at the stop
		case l.Dead != victim:
			row.False++
		default:
			at = append(at, l.DeliveredMono)
			if l.Rank == l.Detector {
				first = l.DeliveredMono
			}
		}
	}
	row.Complete = len(at) == n-1 && first > 0 && row.Exited == 0
	if row.Complete {
		row.Detect = time.Duration(first - killed)
		row.Spread = time.Duration(slices.Max(at) - first)
	}
	return row, nil
}

// PropagationTable prints, per size and broadcast, the median and spread
// of the propagation time and the median messages per failure.
func PropagationTable(p func(string, ...any), cfg PropagationConfig, rows []PropagationRow) {
	p("Propagation over TCP: one kill -9, h=%v δ=%v %v, %d runs per row, interleaved\n\n", cfg.H, cfg.Delta, cfg.Extra, cfg.Runs)
	p("| N | broadcast | complete | false reports / live agents evicted | detection→last survivor: median (min–max) | messages per failure: median (min–max) |\n|---|---|---|---|---|---|\n")
	for _, n := range cfg.Ns {
		for _, b := range cfg.Broadcasts {
			var ts []time.Duration
			var ms []uint64
			complete, falses, exits := 0, 0, 0
			for _, r := range rows {
				if r.N != n || r.Broadcast != b {
					continue
				}
				falses += r.False
				exits += r.Exited
				if r.Complete {
					complete++
					ts = append(ts, r.Spread)
					ms = append(ms, r.Msgs)
				}
			}
			if len(ts) == 0 {
				p("| %d | %s | 0 of %d | %d / %d | | |\n", n, b, cfg.Runs, falses, exits)
				continue
			}
			slices.Sort(ts)
			slices.Sort(ms)
			r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
			p("| %d | %s | %d of %d | %d / %d | %v (%v–%v) | %d (%d–%d) |\n", n, b, complete, cfg.Runs, falses, exits,
				r(ts[len(ts)/2]), r(ts[0]), r(ts[len(ts)-1]), ms[len(ms)/2], ms[0], ms[len(ms)-1])
		}
	}
}
