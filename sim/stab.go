package sim

import (
	"fmt"
	"math"
	"time"
)

// Scenario is one of seed 000 §4's detector settings.
type Scenario struct {
	Name     string
	H, Delta int64
	// T bounds one message's transfer time (one-port model).
	T int64
}

// The scenarios of seed 000 §4 (t = 1 ms).
var (
	// LowNoise minimises the failure-free overhead: h = 10 s, δ = 1 min.
	LowNoise = Scenario{Name: "LOWNOISE", H: int64(10 * time.Second), Delta: int64(time.Minute), T: int64(time.Millisecond)}
	// LowLat favours detection latency: h = 0.1 s, δ = 1 s.
	LowLat = Scenario{Name: "LOWLAT", H: int64(100 * time.Millisecond), Delta: int64(time.Second), T: int64(time.Millisecond)}
)

// StabStats aggregates detector runs at one size (times in seconds, from
// the first failure).
type StabStats struct {
	N, Runs int
	// Failures is the mean number of failures until the stable
	// configuration.
	Failures float64
	// FirstKnown and Stabilized are the mean times until every alive rank
	// knew the first failure and until the first stable configuration;
	// FirstKnownSE and StabilizedSE their standard errors.
	FirstKnown, FirstKnownSE, Stabilized, StabilizedSE float64
	// MaxStabilized is the largest stabilization time observed.
	MaxStabilized float64
	// Unstable counts runs that did not stabilize within the horizon.
	Unstable int
	// Msgs is the mean number of broadcast and NEWOBSERVER messages.
	Msgs float64
	// Events is the total number of events processed.
	Events uint64
}

// StabStudy runs runs detector simulations of scenario sc at n ranks with
// failure plan plan (run i seeded RunSeed(seed, i)) on workers goroutines,
// heartbeats skipped as in seed 000 §4.1 and timers as in Algorithm 1,
// calling progress after each run.
func StabStudy(sc Scenario, n int, plan FailurePlan, runs, workers int, seed uint64, progress func()) (StabStats, error) {
	cfg := DetectorConfig{N: n, H: sc.H, Delta: sc.Delta, Net: OnePort{T: sc.T}, Failures: plan}
	res, err := runDetectors(cfg, runs, workers, seed, progress)
	if err != nil {
		return StabStats{}, err
	}
	st := StabStats{N: n, Runs: runs}
	var fk, stb meanVar
	for _, r := range res {
		st.Events += r.Events
		st.Failures += float64(r.Failures)
		st.Msgs += float64(r.BcastMsgs + r.NewObserverMsgs)
		if r.Stabilized < 0 {
			st.Unstable++
			continue
		}
		fk.add(float64(r.FirstKnown) / 1e9)
		s := float64(r.Stabilized) / 1e9
		stb.add(s)
		st.MaxStabilized = max(st.MaxStabilized, s)
	}
	st.Failures /= float64(runs)
	st.Msgs /= float64(runs)
	st.FirstKnown, st.FirstKnownSE = fk.mean(), fk.se()
	st.Stabilized, st.StabilizedSE = stb.mean(), stb.se()
	return st, nil
}

// meanVar accumulates a mean and a variance (Welford).
type meanVar struct {
	n       int
	m, s2   float64
	lo, hi  float64
	started bool
}

func (a *meanVar) add(x float64) {
	a.n++
	d := x - a.m
	a.m += d / float64(a.n)
	a.s2 += d * (x - a.m)
	if !a.started || x < a.lo {
		a.lo = x
	}
	if !a.started || x > a.hi {
		a.hi = x
	}
	a.started = true
}

func (a *meanVar) mean() float64 { return a.m }

// se is the standard error of the mean.
func (a *meanVar) se() float64 {
	if a.n < 2 {
		return 0
	}
	return math.Sqrt(a.s2/float64(a.n-1)) / math.Sqrt(float64(a.n))
}

// runDetectors validates cfg and runs runs ≥ 1 simulations of it on
// workers goroutines, run i seeded RunSeed(seed, i), calling progress
// after each; the first error of any run is returned.
func runDetectors(cfg DetectorConfig, runs, workers int, seed uint64, progress func()) ([]DetectorResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if runs < 1 {
		return nil, fmt.Errorf("sim: a study with %d runs", runs)
	}
	res := make([]DetectorResult, runs)
	errs := make([]error, runs)
	Parallel(runs, workers, func(i int) {
		d, err := NewDetector(cfg, RunSeed(seed, i))
		if err != nil {
			errs[i] = err
		} else {
			res[i] = d.Run()
		}
		if progress != nil {
			progress()
		}
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// RunCounts are what the detectors of a study's runs did: means over the
// runs, but for the totals FalseSuspicions, Evicted and Events.
type RunCounts struct {
	// Detections is the mean number of broadcasts the rings started.
	Detections float64
	// FalseSuspicions and Evicted are totals over the runs: live ranks put
	// in some D_i, and live ranks evicted as a consequence.
	FalseSuspicions, Evicted int
	// Message means: broadcast (all copies), NEWOBSERVER, PROBE and ALIVE,
	// SYNC (dead-list repair), others (EVICTED).
	BcastMsgs, NewObserverMsgs, ProbeMsgs, SyncMsgs, OtherMsgs float64
	// Events is the total number of events processed.
	Events uint64
}

// add counts run r (as sums: mean divides the means' by the runs).
func (c *RunCounts) add(r DetectorResult) {
	c.Detections += float64(r.Detections)
	c.FalseSuspicions += r.FalseSuspicions
	c.Evicted += r.Evicted
	c.BcastMsgs += float64(r.BcastMsgs)
	c.NewObserverMsgs += float64(r.NewObserverMsgs)
	c.ProbeMsgs += float64(r.ProbeMsgs)
	c.SyncMsgs += float64(r.SyncMsgs)
	c.OtherMsgs += float64(r.OtherMsgs)
	c.Events += r.Events
}

// mean turns the sums of runs runs into means.
func (c *RunCounts) mean(runs int) {
	for _, p := range []*float64{&c.Detections, &c.BcastMsgs, &c.NewObserverMsgs, &c.ProbeMsgs, &c.SyncMsgs, &c.OtherMsgs} {
		*p /= float64(runs)
	}
}
