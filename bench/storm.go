package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/launch"
)

// The storm part's burst modes: how the k hit ranks are hit.
const (
	// StormKill is kill -9 of every hit rank at once.
	StormKill = "kill"
	// StormStop is SIGSTOP of every hit rank at once, and SIGCONT after
	// StormConfig.StopFor (longer than δ).
	StormStop = "stop"
)

// The storm part's targets: which ranks a burst hits.
const (
	// StormRanks hits k ranks drawn at random.
	StormRanks = "ranks"
	// StormHosts hits whole pretended hosts (RanksPerHost consecutive
	// ranks each, drawn at random; the last one partly when k is not a
	// multiple), the agents told the placement (VIGIL_RANKS_PER_HOST).
	StormHosts = "hosts"
)

// StormConfig is the storm part (issue #29): bursts of K ranks of N hit
// at the same instant, Vigil's agents beside memberlist under the same
// bursts (the same hit ranks, run after run), and what the survivors
// reported.
type StormConfig struct {
	// VigilBin runs the agents (`vigil agent`), BenchBin memberlist's
	// members (`vigil-bench child memberlist`).
	VigilBin, BenchBin string
	N                  int
	Ks                 []int
	// Modes are StormKill and/or StormStop; Targets StormRanks and/or
	// StormHosts; Systems Vigil and/or Memberlist.
	Modes, Targets []string
	Systems        []System
	// RanksPerHost is the size of a pretended host (StormHosts; default 8).
	RanksPerHost int
	// Runs per k, mode, target and system.
	Runs int
	// H and Delta are Vigil's h and δ.
	H, Delta time.Duration
	// MemberlistPeriod is memberlist's probe interval (default 200 ms,
	// its ProbeTimeout half that, as in the head-to-head: 128 members
	// probing every 10 ms or 100 ms never all joined on this loaded
	// 2-core machine), and MemberlistWait how long its survivors are
	// watched (default 12 s: its suspicion lasts 4·log10(N) probe
	// intervals at least, up to 6 times that without confirmations).
	MemberlistPeriod, MemberlistWait time.Duration
	// StopFor is how long StormStop keeps the hit ranks stopped (default
	// 2δ + 20 ms).
	StopFor time.Duration
	// Wait is how long the survivors are watched after the burst
	// (default 3 s): losses after the burst's own detection are counted.
	Wait time.Duration
	Log  io.Writer
}

// StormRun is one burst.
type StormRun struct {
	System       System
	Mode, Target string
	N, K, Run    int
	Hit          []int
	// Lost are the ranks not hit that some rank reported dead (or that
	// were evicted) during the watch.
	Lost []int
	// Detected counts the hit ranks some survivor reported.
	Detected int
	// Same: every survivor (neither hit nor lost) reported the same set
	// of ranks; Complete: every survivor reported every hit rank.
	Same, Complete bool
	// Stable is the time from the burst until the last survivor learned
	// the last hit rank (when Complete).
	Stable time.Duration
	// Refuted counts memberlist's members declared dead that came back.
	Refuted int
	// Before counts the ranks reported dead or evicted before the burst
	// (a start-up on a loaded machine); they are left out of the rest.
	Before int
}

// stormReport is one line of a member during the watch: rank By reported
// Dead dead at Mono, or (Evicted) By was declared dead by the job, or
// (Alive) memberlist's By saw Dead come back.
type stormReport struct {
	By, Dead       int
	Mono           int64
	Evicted, Alive bool
}

// stormJob is a running group of N members of one system.
type stormJob struct {
	signal func(r int, sig syscall.Signal) error
	stop   func()
	mu     sync.Mutex
	seen   []stormReport
}

func (j *stormJob) add(r stormReport) {
	j.mu.Lock()
	j.seen = append(j.seen, r)
	j.mu.Unlock()
}

func (j *stormJob) reports() []stormReport {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.seen)
}

func (cfg *StormConfig) defaults() error {
	if cfg.N < 4 {
		return fmt.Errorf("bench: storm: N = %d, want ≥ 4", cfg.N)
	}
	for _, k := range cfg.Ks {
		if k < 1 || k >= cfg.N {
			return fmt.Errorf("bench: storm: k = %d, want 1 … N−1 = %d", k, cfg.N-1)
		}
	}
	for _, m := range cfg.Modes {
		if m != StormKill && m != StormStop {
			return fmt.Errorf("bench: storm: mode %q, want %s or %s", m, StormKill, StormStop)
		}
	}
	for _, t := range cfg.Targets {
		if t != StormRanks && t != StormHosts {
			return fmt.Errorf("bench: storm: target %q, want %s or %s", t, StormRanks, StormHosts)
		}
	}
	for _, s := range cfg.Systems {
		if s != Vigil && s != Memberlist {
			return fmt.Errorf("bench: storm: system %q, want %s or %s", s, Vigil, Memberlist)
		}
	}
	if len(cfg.Ks) == 0 || len(cfg.Modes) == 0 || len(cfg.Targets) == 0 || len(cfg.Systems) == 0 {
		return errors.New("bench: storm: want Ks, Modes, Targets and Systems")
	}
	if cfg.RanksPerHost <= 0 {
		cfg.RanksPerHost = 8
	}
	if cfg.Runs <= 0 {
		cfg.Runs = 1
	}
	if cfg.H <= 0 || cfg.Delta <= cfg.H {
		return fmt.Errorf("bench: storm: h = %v, δ = %v: want 0 < h < δ", cfg.H, cfg.Delta)
	}
	if cfg.MemberlistPeriod <= 0 {
		cfg.MemberlistPeriod = 200 * time.Millisecond
	}
	if cfg.MemberlistWait <= 0 {
		cfg.MemberlistWait = 12 * time.Second
	}
	if cfg.StopFor <= 0 {
		cfg.StopFor = 2*cfg.Delta + 20*time.Millisecond
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 3 * time.Second
	}
	return nil
}

// Storm runs the bursts: for each run, k, mode and target, the same hit
// ranks for every system, one system after the other.
func Storm(ctx context.Context, cfg StormConfig) ([]StormRun, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 29))
	var runs []StormRun
	var failed []error
	for run := range cfg.Runs {
		for _, k := range cfg.Ks {
			for _, mode := range cfg.Modes {
				for _, target := range cfg.Targets {
					hit := stormHit(rng, cfg.N, k, target, cfg.RanksPerHost)
					for _, sys := range cfg.Systems {
						if err := ctx.Err(); err != nil {
							return runs, err
						}
						r, err := stormRun(cfg, sys, mode, target, hit)
						if err != nil {
							// One job that did not start does not end the part.
							err = fmt.Errorf("storm %s %s %s k=%d run %d: %w", sys, mode, target, k, run, err)
							failed = append(failed, err)
							if cfg.Log != nil {
								fmt.Fprintln(cfg.Log, err)
							}
							continue
						}
						r.Run = run
						runs = append(runs, r)
						if cfg.Log != nil {
							fmt.Fprintf(cfg.Log, "storm %-10s %-4s %-5s k=%-2d run %d: lost beyond k %d %v, detected %d/%d, same set %v, complete %v, stable %v, refuted %d, reported before the burst %d\n",
								sys, mode, target, k, run, len(r.Lost), r.Lost, r.Detected, k, r.Same, r.Complete,
								r.Stable.Round(time.Millisecond), r.Refuted, r.Before)
						}
					}
				}
			}
		}
	}
	return runs, errors.Join(failed...)
}

// stormHit draws the k ranks of n a burst hits: at random, or whole
// pretended hosts of perHost consecutive ranks (the last one partly).
func stormHit(rng *rand.Rand, n, k int, target string, perHost int) []int {
	var hit []int
	if target == StormHosts {
		hosts := rng.Perm((n + perHost - 1) / perHost)
		for _, h := range hosts {
			for r := h * perHost; r < min(n, (h+1)*perHost) && len(hit) < k; r++ {
				hit = append(hit, r)
			}
			if len(hit) == k {
				break
			}
		}
	} else {
		hit = rng.Perm(n)[:k]
	}
	slices.Sort(hit)
	return hit
}

// stormRun starts sys's members, hits them, watches and stops them.
func stormRun(cfg StormConfig, sys System, mode, target string, hit []int) (StormRun, error) {
	r := StormRun{System: sys, Mode: mode, Target: target, N: cfg.N, K: len(hit), Hit: hit}
	var j *stormJob
	var err error
	if sys == Vigil {
		j, err = startStormVigil(cfg, target == StormHosts)
	} else {
		j, err = startStormMemberlist(cfg)
	}
	if err != nil {
		return r, err
	}
	defer j.stop()
	// Past Vigil's start-up grace (-grace 1s), memberlist's joins settled;
	// then at a random phase of the period, as a crash comes.
	time.Sleep(1500*time.Millisecond + rand.N(cfg.H))
	sig := syscall.SIGKILL
	if mode == StormStop {
		sig = syscall.SIGSTOP
	}
	t0 := MonoNow()
	for _, v := range hit {
		// A rank gone already (declared dead before the burst) counts as
		// hit; the reports before the burst are counted apart.
		if err := j.signal(v, sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return r, err
		}
	}
	if mode == StormStop {
		time.Sleep(cfg.StopFor)
		for _, v := range hit {
			j.signal(v, syscall.SIGCONT)
		}
	}
	wait := cfg.Wait
	if sys == Memberlist {
		wait = cfg.MemberlistWait
	}
	time.Sleep(max(0, wait-time.Duration(MonoNow()-t0)))
	stormOutcome(&r, j.reports(), t0)
	return r, nil
}

// stormOutcome fills r's results from the reports seen since t0.
func stormOutcome(r *StormRun, seen []stormReport, t0 int64) {
	isHit := map[int]bool{}
	for _, v := range r.Hit {
		isHit[v] = true
	}
	lost := map[int]bool{}
	sets := map[int]map[int]int64{} // reporter → rank → first report
	before := map[int]bool{}
	for _, s := range seen {
		switch {
		case s.Mono < t0 && s.Evicted:
			before[s.By] = true
		case s.Mono < t0 && !s.Alive:
			before[s.Dead] = true
		case s.Mono < t0:
		case s.Evicted:
			if !isHit[s.By] {
				lost[s.By] = true
			}
		case s.Alive:
			r.Refuted++
		default:
			if !isHit[s.Dead] {
				lost[s.Dead] = true
			}
			if sets[s.By] == nil {
				sets[s.By] = map[int]int64{}
			}
			if _, ok := sets[s.By][s.Dead]; !ok {
				sets[s.By][s.Dead] = s.Mono
			}
		}
	}
	r.Before = len(before)
	for x := range lost {
		if !before[x] {
			r.Lost = append(r.Lost, x)
		}
	}
	sort.Ints(r.Lost)
	detected := map[int]bool{}
	r.Same, r.Complete = true, true
	var first map[int]int64
	var last int64
	for s := range r.N {
		if isHit[s] || lost[s] || before[s] {
			continue
		}
		set := sets[s]
		if first == nil {
			first = set
			if first == nil {
				first = map[int]int64{}
			}
		} else if len(set) != len(first) || !sameKeys(set, first) {
			r.Same = false
		}
		for _, v := range r.Hit {
			at, ok := set[v]
			if !ok {
				r.Complete = false
				continue
			}
			detected[v] = true
			last = max(last, at)
		}
	}
	r.Detected = len(detected)
	if first == nil { // no survivor: nothing complete, nothing agreed
		r.Same, r.Complete = false, false
	}
	if r.Complete {
		r.Stable = time.Duration(last - t0)
	}
}

func sameKeys(a, b map[int]int64) bool {
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// startStormVigil starts N agents (told the pretended hosts when hosts)
// and collects their crash reports and evictions.
func startStormVigil(cfg StormConfig, hosts bool) (*stormJob, error) {
	argv := []string{cfg.VigilBin, "agent", "-h", cfg.H.String(), "-delta", cfg.Delta.String(), "-grace", "1s"}
	opts := launch.Options{Stderr: io.Discard}
	if hosts {
		opts.ExtraEnv = []string{bootstrap.EnvRanksPerHost + "=" + strconv.Itoa(cfg.RanksPerHost)}
	}
	job, err := launch.Start(cfg.N, argv, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := job.WaitReady(ctx); err != nil {
		job.Stop(time.Second)
		return nil, err
	}
	j := &stormJob{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for l := range job.Lines {
			switch {
			case l.Ev == "dead" && !l.Left:
				j.add(stormReport{By: int(l.Rank), Dead: int(l.Dead), Mono: l.DeliveredMono})
			case l.Ev == "evicted":
				j.add(stormReport{By: int(l.Rank), Mono: l.Mono, Evicted: true})
			}
		}
	}()
	j.signal = func(r int, sig syscall.Signal) error { return job.Signal(uint32(r), sig) }
	j.stop = func() { job.Stop(5 * time.Second); <-done }
	return j, nil
}

// startStormMemberlist starts N memberlist members probing every H and
// collects their reports.
func startStormMemberlist(cfg StormConfig) (*stormJob, error) {
	c, err := startChildren(H2HConfig{BenchBin: cfg.BenchBin, Period: cfg.MemberlistPeriod}, Memberlist, cfg.N)
	if err != nil {
		return nil, err
	}
	if err := waitReadyFor(c, cfg.N, 3*time.Minute); err != nil {
		c.stop()
		return nil, err
	}
	j := &stormJob{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for l := range c.lines {
			switch l.Ev {
			case "dead":
				j.add(stormReport{By: l.Rank, Dead: l.Dead, Mono: l.Mono})
			case "alive":
				j.add(stormReport{By: l.Rank, Dead: l.Dead, Mono: l.Mono, Alive: true})
			}
		}
	}()
	j.signal = func(r int, sig syscall.Signal) error { return c.cmds[r].Process.Signal(sig) }
	j.stop = func() { c.stop(); <-done }
	return j, nil
}

// StormTable prints, per system, mode, target and k, how many runs lost
// ranks beyond the k hit, whether the survivors agreed and how long the
// last survivor took to learn the last hit rank.
func StormTable(p func(string, ...any), cfg StormConfig, runs []StormRun) {
	cfg.defaults()
	p("Storms: bursts of k of %d ranks hit at once (kill -9, or SIGSTOP for %v then SIGCONT), Vigil at h=%v δ=%v watched %v after the burst, memberlist probing every %v (probe time-out half that) watched %v, ranks at random or whole pretended hosts of %d; the same hit ranks for both systems\n\n",
		cfg.N, cfg.StopFor, cfg.H, cfg.Delta, cfg.Wait, cfg.MemberlistPeriod, cfg.MemberlistWait, cfg.RanksPerHost)
	p("| system | burst | hit | k | runs | runs losing more than k | lost beyond k: median, max | hit ranks reported (min) | same set at every survivor | every hit rank at every survivor | stabilisation: median, max | refuted | reported before the burst (max) |\n")
	p("|---|---|---|---:|---:|---:|---|---:|---:|---:|---|---:|---:|\n")
	type key struct {
		sys          System
		mode, target string
		k            int
	}
	var keys []key
	by := map[key][]StormRun{}
	for _, r := range runs {
		k := key{r.System, r.Mode, r.Target, r.K}
		if by[k] == nil {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r)
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		if c := cmpStr(string(a.sys), string(b.sys)); c != 0 {
			return c
		}
		if c := cmpStr(a.mode, b.mode); c != 0 {
			return c
		}
		if c := cmpStr(a.target, b.target); c != 0 {
			return c
		}
		return a.k - b.k
	})
	for _, k := range keys {
		rs := by[k]
		var lost []int
		var stable []time.Duration
		losing, same, complete, refuted, detected, before := 0, 0, 0, 0, k.k, 0
		for _, r := range rs {
			lost = append(lost, len(r.Lost))
			if len(r.Lost) > 0 {
				losing++
			}
			if r.Same {
				same++
			}
			if r.Complete {
				complete++
				stable = append(stable, r.Stable)
			}
			refuted += r.Refuted
			detected = min(detected, r.Detected)
			before = max(before, r.Before)
		}
		slices.Sort(lost)
		slices.Sort(stable)
		st := "—"
		if len(stable) > 0 {
			st = fmt.Sprintf("%v, %v", stable[len(stable)/2].Round(time.Millisecond), stable[len(stable)-1].Round(time.Millisecond))
		}
		p("| %s | %s | %s | %d | %d | %d | %d, %d | %d | %d/%d | %d/%d | %s | %d | %d |\n", k.sys, k.mode, k.target, k.k, len(rs), losing,
			lost[len(lost)/2], lost[len(lost)-1], detected, same, len(rs), complete, len(rs), st, refuted, before)
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// StormAccuracyConfig is the storm part's accuracy-at-scale rows: the
// cost part with a tight δ (CostConfig.Delta) at each N, under Burners
// CPU burners, the agents' reports beside the C reference's gaps above δ
// in the same run.
type StormAccuracyConfig struct {
	CBin, VigilBin string
	Ns             []int
	// Timings are the (h, δ) pairs.
	Timings [][2]time.Duration
	Burners int
	Log     io.Writer
}

// StormAccuracy runs the rows: for each timing and N, one round of the C
// reference and of the agents (shared memory), burners running.
func StormAccuracy(ctx context.Context, cfg StormAccuracyConfig) ([]CostRun, error) {
	b, err := StartBurners(cfg.Burners)
	if err != nil {
		return nil, err
	}
	defer b.Stop()
	var runs []CostRun
	var failed []error
	for _, t := range cfg.Timings {
		for _, n := range cfg.Ns {
			// One N at a time: agents that do not all start at one N (the
			// start-up itself falsely reporting some) leave the others.
			rs, err := Cost(ctx, CostConfig{CBin: cfg.CBin, VigilBin: cfg.VigilBin, Hs: []time.Duration{t[0]}, Ns: []int{n},
				Transports: []string{CostSHM}, Rounds: 1, Heartbeat: CostHeartbeatMatch, RealTime: true, Delta: t[1], Log: cfg.Log})
			runs = append(runs, rs...)
			if ctx.Err() != nil {
				return runs, ctx.Err()
			}
			if err != nil {
				failed = append(failed, err)
				if cfg.Log != nil {
					fmt.Fprintln(cfg.Log, err)
				}
			}
		}
	}
	return runs, errors.Join(failed...)
}

// StormAccuracyTable prints the rows: per h, δ and N, the C reference's
// gaps above δ and what the agents reported, in the same run.
func StormAccuracyTable(p func(string, ...any), cfg StormAccuracyConfig, runs []CostRun) {
	p("Accuracy at scale: %d CPU burners, heartbeats over shared memory, the C reference (bench/csrc/hbcost.c) and the agents one after the other at each N; a gap is a C observer's check finding its emitter silent for δ\n\n", cfg.Burners)
	p("| h | δ | N | C: gaps above δ | agents: crash reports | ranks reported | agents exited in the window | reports at the stop | agents ≤ C |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n")
	type key struct {
		h, delta time.Duration
		n        int
	}
	c, v := map[key]CostRun{}, map[key]CostRun{}
	var keys []key
	for _, r := range runs {
		k := key{r.H, r.Delta, r.N}
		switch r.Side {
		case CostC:
			c[k] = r
			keys = append(keys, k)
		case CostVigil:
			v[k] = r
		}
	}
	for _, k := range keys {
		cr, vr := c[k], v[k]
		if _, ok := v[k]; !ok {
			p("| %v | %v | %d | %d | the agents did not all start (see the log) | | | | false |\n", k.h, k.delta, k.n, cr.Suspicions)
			continue
		}
		lost := max(vr.Suspected, vr.Lost)
		p("| %v | %v | %d | %d | %d | %d | %d | %d | %v |\n", k.h, k.delta, k.n, cr.Suspicions, vr.Suspicions, vr.Suspected, vr.Lost, vr.AtStop,
			lost <= cr.Suspicions)
	}
}
