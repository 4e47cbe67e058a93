package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/vigil-hpc/vigil/ranks"
)

// Cut is a fabric partition (issue #29) seen from one side: ranks are
// placed on hosts of HostSize consecutive ranks, and a switch of Size
// consecutive ranks (whole hosts, at a host boundary drawn uniformly) is
// cut off from the rest at the start of the failure phase; nothing crosses
// the cut afterwards. Each side then sees exactly the crash of the other
// (no message or heartbeat reaches it from there, none of its own arrives
// there): Minority false is the view of the larger side (the switch's
// ranks crash), Minority true the view of the switch's ranks (every other
// rank crashes).
type Cut struct {
	HostSize, Size int
	Minority       bool
}

// String implements FailurePlan.
func (c Cut) String() string {
	side := "majority"
	if c.Minority {
		side = "minority"
	}
	return fmt.Sprintf("cut(%d ranks off, %s side)", c.Size, side)
}

func (c Cut) plan(n int, r *rand.Rand) ([]Failure, int64) {
	size := max(c.HostSize, 1)
	m := min(max(c.Size, 1), n-1)
	start := r.IntN((n+size-1)/size) * size
	in := func(x int) bool { return (x-start+n)%n < m }
	var f []Failure
	for x := range n {
		if in(x) != c.Minority {
			f = append(f, Failure{Rank: ranks.Rank(x)})
		}
	}
	return f, 0
}

// BurstStats aggregates the runs of one row of the burst study (issue #29
// item 7): one failure plan at n ranks. Times are in seconds from the
// burst, means over the runs.
type BurstStats struct {
	// Plan names the burst: "random", "hosts", "cut, majority" or "cut,
	// minority"; Fraction is the fraction of the job it takes out (killed,
	// or on the other side of the cut).
	Plan     string
	N, Runs  int
	Fraction float64
	// Killed is the number of ranks the plan takes out; Lost the most
	// ranks any run lost (the killed plus the live ranks evicted as
	// declared dead).
	Killed, Lost int
	// AllKnown is the time until every survivor knew exactly the dead
	// ranks, Stabilized until the ring reconnected too: mean and maximum
	// over the runs that got there; Incomplete and Unstable count the runs
	// that did not within the horizon.
	AllKnown, AllKnownMax, Stabilized, StabilizedMax float64
	Incomplete, Unstable                             int
	// MsgsPerSurvivor is the mean number of protocol messages (broadcast
	// copies, NEWOBSERVER, PROBE and ALIVE, SYNC, EVICTED) sent per
	// survivor.
	MsgsPerSurvivor float64
	RunCounts
}

// BurstStudy runs runs detector simulations of cfg (whose Failures is the
// burst, named plan, taking out fraction of the job), run i seeded
// RunSeed(seed, i), on workers goroutines, calling progress after each run.
func BurstStudy(cfg DetectorConfig, plan string, fraction float64, runs, workers int, seed uint64, progress func()) (BurstStats, error) {
	res, err := runDetectors(cfg, runs, workers, seed, progress)
	if err != nil {
		return BurstStats{}, err
	}
	st := BurstStats{Plan: plan, N: cfg.N, Runs: runs, Fraction: fraction}
	var known, stab meanVar
	var survivors float64
	for _, r := range res {
		killed := len(r.Dead) - r.Evicted
		st.Killed = max(st.Killed, killed)
		st.Lost = max(st.Lost, len(r.Dead))
		st.add(r)
		msgs := r.BcastMsgs + r.NewObserverMsgs + r.ProbeMsgs + r.SyncMsgs + r.OtherMsgs
		survivors = float64(cfg.N - len(r.Dead))
		st.MsgsPerSurvivor += float64(msgs) / max(survivors, 1)
		if r.AllKnown < 0 {
			st.Incomplete++
		} else {
			known.add(float64(r.AllKnown) / 1e9)
		}
		if r.Stabilized < 0 {
			st.Unstable++
		} else {
			stab.add(float64(r.Stabilized) / 1e9)
		}
	}
	st.mean(runs)
	st.MsgsPerSurvivor /= float64(runs)
	st.AllKnown, st.AllKnownMax = known.mean(), known.hi
	st.Stabilized, st.StabilizedMax = stab.mean(), stab.hi
	return st, nil
}

// BurstPlans returns the bursts of the study at n ranks placed on hosts of
// hostSize ranks, for each fraction: as many random ranks, as many whole
// hosts (at least one), and a cut of that many ranks seen from each side.
// The names are BurstStats.Plan's.
func BurstPlans(n, hostSize int, fractions []float64) (names []string, fracs []float64, plans []FailurePlan) {
	for _, f := range fractions {
		k := max(1, int(f*float64(n)+0.5))
		hosts := max(1, (k+hostSize/2)/hostSize)
		names = append(names, "random", "hosts", "cut, majority", "cut, minority")
		fracs = append(fracs, f, f, f, f)
		plans = append(plans, Burst{Count: k}, HostCrash{HostSize: hostSize, Hosts: hosts},
			Cut{HostSize: hostSize, Size: hosts * hostSize}, Cut{HostSize: hostSize, Size: hosts * hostSize, Minority: true})
	}
	return names, fracs, plans
}
