package bench

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Probe names a CPU-noise probe.
type Probe string

// The probes (anchors.md, "Benchmark methodology references"):
//   - FTQ, fixed time quantum: count the work done in each quantum of
//     fixed length, quanta end at start + (i+1)·T so there is no drift;
//     noise = 1 − mean(work) / max(work).
//   - FWQ, fixed work quantum: time a fixed amount of work again and again;
//     noise = Σ(t − t_min) / Σ t, the excess over the fastest sample.
//   - Selfish detour: a tight loop reading the clock that records every gap
//     above a threshold; noise = Σ detours / elapsed.
const (
	FTQ     Probe = "FTQ"
	FWQ     Probe = "FWQ"
	Selfish Probe = "Selfish"
)

// Probes lists the probes.
var Probes = []Probe{FTQ, FWQ, Selfish}

// ProbeOptions configures a probe run.
type ProbeOptions struct {
	// Duration is how long to sample (default 1 s).
	Duration time.Duration
	// Quantum is FTQ's time quantum and FWQ's target work duration
	// (default 100 µs).
	Quantum time.Duration
	// Threshold is the smallest gap the selfish loop counts as a detour
	// (default 1 µs).
	Threshold time.Duration
	// CPU pins the sampling thread to this CPU (−1: not pinned).
	CPU int
}

func (o ProbeOptions) withDefaults() ProbeOptions {
	if o.Duration <= 0 {
		o.Duration = time.Second
	}
	if o.Quantum <= 0 {
		o.Quantum = 100 * time.Microsecond
	}
	if o.Threshold <= 0 {
		o.Threshold = time.Microsecond
	}
	return o
}

// NoiseResult is what one probe run measured.
type NoiseResult struct {
	Probe   Probe
	Elapsed time.Duration
	Samples int
	// Noise is the fraction of the CPU the probe did not get (see Probe).
	Noise float64
	// Detours histograms the lost time per sample in nanoseconds: the
	// selfish loop's gaps above the threshold; FWQ's excess over the
	// fastest sample; FTQ's missing work converted to time.
	Detours Log2Hist
	// MaxDetour is the largest of them.
	MaxDetour time.Duration
	Pinned    bool
}

// RunProbe runs p on a locked OS thread (pinned when opt.CPU ≥ 0) with the
// garbage collector off while sampling.
func RunProbe(p Probe, opt ProbeOptions) (NoiseResult, error) {
	opt = opt.withDefaults()
	res := NoiseResult{Probe: p}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if opt.CPU >= 0 {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return res, fmt.Errorf("bench: sched_getaffinity: %w", err)
		}
		defer unix.SchedSetaffinity(0, &set)
		var one unix.CPUSet
		one.Set(opt.CPU)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			return res, fmt.Errorf("bench: pinning the probe to CPU %d: %w", opt.CPU, err)
		}
		res.Pinned = true
	}
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	switch p {
	case FTQ:
		ftq(&res, opt)
	case FWQ:
		fwq(&res, opt)
	case Selfish:
		selfish(&res, opt)
	default:
		return res, fmt.Errorf("bench: unknown probe %q (want FTQ, FWQ or Selfish)", p)
	}
	return res, nil
}

// work is the unit of FTQ and FWQ work: a few dependent integer operations
// the compiler cannot remove.
//
//go:noinline
func work(x uint64) uint64 {
	for range 64 {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// Sink keeps the probes' work observable so the compiler cannot drop it.
var Sink atomic.Uint64

func ftq(res *NoiseResult, opt ProbeOptions) {
	q := opt.Quantum
	n := int(opt.Duration / q)
	counts := make([]uint64, n)
	x := uint64(1)
	start := time.Now()
	for i := range counts {
		end := start.Add(time.Duration(i+1) * q)
		var c uint64
		for time.Now().Before(end) {
			x = work(x)
			c++
		}
		counts[i] = c
	}
	res.Elapsed = time.Since(start)
	Sink.Add(x)
	res.Samples = n
	var top, sum uint64
	for _, c := range counts {
		top = max(top, c)
		sum += c
	}
	if top == 0 || n == 0 {
		return
	}
	res.Noise = 1 - float64(sum)/float64(n)/float64(top)
	perUnit := float64(q) / float64(top) // ns per work unit at full speed
	for _, c := range counts {
		lost := time.Duration(float64(top-c) * perUnit)
		res.Detours.Add(uint64(lost))
		res.MaxDetour = max(res.MaxDetour, lost)
	}
}

func fwq(res *NoiseResult, opt ProbeOptions) {
	// Calibrate: how many units take about one quantum.
	x := uint64(1)
	units := 1
	for {
		t0 := time.Now()
		for range units {
			x = work(x)
		}
		if time.Since(t0) >= opt.Quantum/2 || units > 1<<30 {
			units = int(float64(units) * float64(opt.Quantum) / float64(max(time.Since(t0), 1)))
			break
		}
		units *= 2
	}
	units = max(units, 1)
	var ts []time.Duration
	start := time.Now()
	for time.Since(start) < opt.Duration {
		t0 := time.Now()
		for range units {
			x = work(x)
		}
		ts = append(ts, time.Since(t0))
	}
	res.Elapsed = time.Since(start)
	Sink.Add(x)
	res.Samples = len(ts)
	if len(ts) == 0 {
		return
	}
	fastest := ts[0]
	var total time.Duration
	for _, t := range ts {
		fastest = min(fastest, t)
		total += t
	}
	var excess time.Duration
	for _, t := range ts {
		e := t - fastest
		excess += e
		res.Detours.Add(uint64(e))
		res.MaxDetour = max(res.MaxDetour, e)
	}
	res.Noise = float64(excess) / float64(total)
}

func selfish(res *NoiseResult, opt ProbeOptions) {
	thr := opt.Threshold
	var lost time.Duration
	start := time.Now()
	last := start
	end := start.Add(opt.Duration)
	var loops int
	for {
		now := time.Now()
		loops++
		if gap := now.Sub(last); gap > thr {
			lost += gap
			res.Detours.Add(uint64(gap))
			res.MaxDetour = max(res.MaxDetour, gap)
			res.Samples++
		}
		last = now
		if now.After(end) {
			break
		}
	}
	res.Elapsed = time.Since(start)
	res.Noise = float64(lost) / float64(res.Elapsed)
}
