package sim

import (
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

// HostCrashStats aggregates the detector runs of one row of the host-crash
// study (issue #13): one network scenario, n ranks, one HostCrash plan and
// one mending window. Times are in seconds from the first failure,
// message counts are means per run.
type HostCrashStats struct {
	Scenario           string
	N, HostSize, Hosts int
	Window             int64
	// Probe is the block-mending window W (0: Algorithm 1).
	Probe, Runs int
	// Labelled: the detectors knew the placement (DetectorConfig.Hosts),
	// so a round takes in the rest of its first candidate's host.
	Labelled bool
	// Failures is the mean number of crashed ranks; Block the largest dead
	// block of consecutive ranks (hosts drawn next to each other merge),
	// its mean and maximum over the runs.
	Failures float64
	Block    float64
	BlockMax int
	// AllKnown is the time until every survivor knew every dead rank
	// (DetectorResult.AllKnown): mean, standard error, min and max over the
	// runs that got there.
	AllKnown, AllKnownSE, AllKnownMin, AllKnownMax float64
	// Stabilized is the mean time until the stable configuration (the
	// ring reconnected too), StabilizedMax its maximum.
	Stabilized, StabilizedMax float64
	// Bound is the largest over the runs of hb.BlockBound (hb.HostBlockBound
	// when Labelled) of the run's largest dead block (plus Window), and WithinBound the number of runs
	// whose AllKnown respected their own bound; both 0 for Algorithm 1,
	// which BlockBound does not describe (see AlgBound).
	Bound       float64
	WithinBound int
	// AlgBound is seed 000's Theorem 1 formula T(f) with f the largest
	// block (hb.Bound; the theorem itself covers f ≤ ⌊log2 n⌋ − 1 only).
	AlgBound float64
	// Incomplete counts runs in which some survivor never knew some dead
	// rank within the horizon; Unstable runs that never reached the stable
	// configuration.
	Incomplete, Unstable int
	RunCounts
}

// DeadBlocks returns the lengths of the maximal blocks of consecutive ranks
// (on the ring of n ranks, wrapping around) among the sorted ranks dead.
func DeadBlocks(n int, dead []ranks.Rank) []int {
	if len(dead) == 0 {
		return nil
	}
	if len(dead) == n {
		return []int{n}
	}
	var out []int
	run := 1
	for i := 1; i < len(dead); i++ {
		if dead[i] == dead[i-1]+1 {
			run++
			continue
		}
		out = append(out, run)
		run = 1
	}
	out = append(out, run)
	if len(out) > 1 && dead[0] == 0 && int(dead[len(dead)-1]) == n-1 {
		out[0] += out[len(out)-1] // the block wraps around
		out = out[:len(out)-1]
	}
	return out
}

// HostCrashStudy runs runs detector simulations of scenario sc at n ranks
// with host crashes plan and block-mending window probe (0: Algorithm 1),
// the detectors told the placement when labelled, run i seeded RunSeed(seed, i) so that every window sees the same hosts
// crash at the same times, on workers goroutines, heartbeats skipped and
// timers as in Algorithm 1, calling progress after each run.
func HostCrashStudy(sc Scenario, n int, plan HostCrash, probe int, labelled bool, runs, workers int, seed uint64, progress func()) (HostCrashStats, error) {
	cfg := DetectorConfig{N: n, H: sc.H, Delta: sc.Delta, Net: OnePort{T: sc.T}, Failures: plan, Probe: probe,
		Partition: detector.PartitionContinue} // 4 hosts of 64 at 512 are half the job
	if labelled {
		cfg.Hosts = plan.Placement(n)
	}
	res, err := runDetectors(cfg, runs, workers, seed, progress)
	if err != nil {
		return HostCrashStats{}, err
	}
	st := HostCrashStats{Scenario: sc.Name, N: n, HostSize: max(plan.HostSize, 1), Hosts: max(plan.Hosts, 1),
		Window: plan.Window, Probe: probe, Runs: runs, Labelled: labelled}
	var known meanVar
	var stab float64
	stabRuns := 0
	for _, r := range res {
		st.add(r)
		st.Failures += float64(r.Failures)
		b := 0
		for _, x := range DeadBlocks(n, r.Dead) {
			b = max(b, x)
		}
		st.Block += float64(b)
		st.BlockMax = max(st.BlockMax, b)
		st.AlgBound = max(st.AlgBound, float64(hb.Bound(b, n, sc.Delta, sc.T))/1e9)
		var bound int64
		if probe > 0 {
			bound = hb.BlockBound(b, probe, n, sc.Delta, sc.T) + plan.Window
			if labelled { // blocks of whole hosts: ⌈b/size⌉ hosts
				bound = hb.HostBlockBound(b, (b+st.HostSize-1)/st.HostSize, probe, n, sc.Delta, sc.T) + plan.Window
			}
			st.Bound = max(st.Bound, float64(bound)/1e9)
		}
		if r.Stabilized < 0 {
			st.Unstable++
		} else {
			s := float64(r.Stabilized) / 1e9
			stab += s
			stabRuns++
			st.StabilizedMax = max(st.StabilizedMax, s)
		}
		if r.AllKnown < 0 {
			st.Incomplete++
			continue
		}
		known.add(float64(r.AllKnown) / 1e9)
		if probe > 0 && r.AllKnown <= bound {
			st.WithinBound++
		}
	}
	st.mean(runs)
	st.Failures /= float64(runs)
	st.Block /= float64(runs)
	if stabRuns > 0 {
		st.Stabilized = stab / float64(stabRuns)
	}
	st.AllKnown, st.AllKnownSE, st.AllKnownMin, st.AllKnownMax = known.mean(), known.se(), known.lo, known.hi
	return st, nil
}
