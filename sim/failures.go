package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

// Failure is one crash: rank Rank stops at time At, relative to the start of
// the failure phase (DetectorConfig.Start). With Mute > 0 it is no crash
// but a mute spell: the rank runs on while its heartbeats are lost for Mute
// (a link cut, a stalled heartbeat thread); past δ it is declared dead and,
// once its heartbeats are seen again, evicted (needs HeartbeatsFull).
type Failure struct {
	At   int64
	Rank ranks.Rank
	Mute int64
}

// FailurePlan says when failures strike and whom. Plans are pure values: a
// run draws everything from its own seed.
type FailurePlan interface {
	// String describes the plan.
	String() string
	// plan returns the failures fixed in advance (sorted by time, relative
	// to the start of the failure phase) and, for an open-ended process,
	// the mean time between failures of one node (0 for none): further
	// failures then strike with rate alive/mtbf at random alive nodes.
	plan(n int, r *rand.Rand) (fixed []Failure, mtbfInd int64)
}

// Script is a fixed list of failures (times relative to the start of the
// failure phase). Ranks must be distinct.
type Script []Failure

// String implements FailurePlan.
func (s Script) String() string { return fmt.Sprintf("script(%d failures)", len(s)) }

func (s Script) plan(int, *rand.Rand) ([]Failure, int64) {
	f := slices.Clone([]Failure(s))
	slices.SortStableFunc(f, func(a, b Failure) int { return cmpInt64(a.At, b.At) })
	return f, 0
}

// Burst is seed 000 §4.2's worst case: Count failures (0 means the largest
// number Theorem 1 covers, ⌊log2 n⌋ − 1) at distinct ranks drawn uniformly,
// the first at the start of the failure phase and the others at times
// uniform in [0, Window] after it: quasi-simultaneous failures when Window
// is well below δ.
type Burst struct {
	Count  int
	Window int64
}

// String implements FailurePlan.
func (b Burst) String() string {
	c := "max"
	if b.Count > 0 {
		c = fmt.Sprint(b.Count)
	}
	return fmt.Sprintf("burst(%s failures within %v)", c, time.Duration(b.Window))
}

func (b Burst) plan(n int, r *rand.Rand) ([]Failure, int64) {
	c := b.Count
	if c <= 0 {
		c = max(1, hb.MaxOverlapping(n))
	}
	c = min(c, n-1)
	victims := distinctRanks(n, c, r)
	f := make([]Failure, c)
	for i, v := range victims {
		at := int64(0)
		if i > 0 && b.Window > 0 {
			at = r.Int64N(b.Window + 1)
		}
		f[i] = Failure{At: at, Rank: v}
	}
	slices.SortStableFunc(f, func(a, b Failure) int { return cmpInt64(a.At, b.At) })
	return f, 0
}

// HostCrash is the crash of whole hosts (issue #13): ranks are placed in
// blocks, host k holding ranks k·HostSize … (k+1)·HostSize − 1 (the last
// host fewer when HostSize does not divide n), and a host crash kills its
// block of consecutive ranks on the observation ring at once. Hosts
// distinct hosts are drawn uniformly; the first crashes at the start of the
// failure phase and each other at a time uniform in [0, Window] after it
// (Window 0: all at once). Hosts drawn next to each other make one longer
// dead block. HostSize < 1 counts as 1 and Hosts < 1 as 1; at least one
// host survives.
type HostCrash struct {
	HostSize, Hosts int
	Window          int64
}

// String implements FailurePlan.
func (h HostCrash) String() string {
	size, hosts := max(h.HostSize, 1), max(h.Hosts, 1)
	s := "host"
	if hosts > 1 {
		s = "hosts"
	}
	if h.Window == 0 {
		return fmt.Sprintf("hostcrash(%d %s of %d ranks at once)", hosts, s, size)
	}
	return fmt.Sprintf("hostcrash(%d %s of %d ranks within %v)", hosts, s, size, time.Duration(h.Window))
}

// Placement returns the host label of each of n ranks under h's
// placement (rank r on host r/HostSize): DetectorConfig.Hosts.
func (h HostCrash) Placement(n int) []uint32 {
	size := max(h.HostSize, 1)
	labels := make([]uint32, n)
	for r := range labels {
		labels[r] = uint32(r / size)
	}
	return labels
}

func (h HostCrash) plan(n int, r *rand.Rand) ([]Failure, int64) {
	size := max(h.HostSize, 1)
	nHosts := (n + size - 1) / size
	c := min(max(h.Hosts, 1), nHosts-1)
	if c < 1 {
		return nil, 0 // a single host: nobody would survive
	}
	var f []Failure
	for i, host := range distinctRanks(nHosts, c, r) {
		at := int64(0)
		if i > 0 && h.Window > 0 {
			at = r.Int64N(h.Window + 1)
		}
		first := int(host) * size
		for x := first; x < min(first+size, n); x++ {
			f = append(f, Failure{At: at, Rank: ranks.Rank(x)})
		}
	}
	slices.SortStableFunc(f, func(a, b Failure) int { return cmpInt64(a.At, b.At) })
	return f, 0
}

// Exponential is seed 000 §3.3's failure process: one failure at a random
// rank at the start of the failure phase, then failures at random alive ranks
// with exponential inter-arrival times of rate λ = n/μ_ind, n being the
// number of alive ranks and μ_ind (MTBF) one node's mean time between
// failures. The run ends at the first stable configuration.
type Exponential struct {
	// MTBF is μ_ind in nanoseconds.
	MTBF int64
}

// String implements FailurePlan.
func (e Exponential) String() string {
	return fmt.Sprintf("exponential(μ_ind=%.3g years)", float64(e.MTBF)/float64(Year))
}

func (e Exponential) plan(n int, r *rand.Rand) ([]Failure, int64) {
	return []Failure{{At: 0, Rank: ranks.Rank(r.IntN(n))}}, e.MTBF
}

// Year is 365.25 days in nanoseconds.
const Year = int64(365.25 * 24 * float64(time.Hour))

// distinctRanks draws c distinct ranks uniformly from [0, n).
func distinctRanks(n, c int, r *rand.Rand) []ranks.Rank {
	seen := make(map[ranks.Rank]bool, c)
	out := make([]ranks.Rank, 0, c)
	for len(out) < c {
		v := ranks.Rank(r.IntN(n))
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
