package bench

import (
	"fmt"
	"time"
)

// Profile sets the size of every part of the suite.
type Profile struct {
	Name string
	// Go IMB over the TCP transport, and the C IMB under mpirun.
	IMBRanks     int
	IMBSizes     []int
	IMBMaxReps   int
	IMBTimeLimit time.Duration
	// Noise probes: duration of each.
	ProbeDuration time.Duration
	// Noise sweep.
	SweepSizes     []int
	SweepTimeLimit time.Duration
	SweepMaxReps   int
	SweepHs        []time.Duration
	SweepPairs     int
	// Accuracy sweep.
	AccuracyRanks    int
	AccuracyHs       []time.Duration
	AccuracyDuration time.Duration
	AccuracyLoads    []string
	// On/off comparison of the rtprocess part (pairs; ranks and step
	// duration as the accuracy sweep).
	GuardHs     []time.Duration
	GuardRounds int
	GuardLoads  []string
	// Emitter lateness: the C loop against the Go emitter (rounds of
	// each variant per load and h, each run LatenessDuration long).
	LatenessHs       []time.Duration
	LatenessDuration time.Duration
	LatenessRounds   int
	// Storms (StormConfig): the burst sizes and the runs per k, mode,
	// target and system.
	StormKs   []int
	StormRuns int
	// Detector cost against the C reference (CostConfig): the grid, the
	// rounds, the bounds of the sampling window, and whether libvigil's
	// in-process side runs too.
	CostHs                    []time.Duration
	CostNs                    []int
	CostTransports            []string
	CostRounds                int
	CostWindow, CostMaxWindow time.Duration
	CostInProcess             bool
	// Scheduler attribution.
	SchedHs       []time.Duration
	SchedDuration time.Duration
	// Head-to-head.
	H2HSizes []int
	// H2HSystems are the systems of the head-to-head (default Vigil,
	// Memberlist).
	H2HSystems []System
	H2HPeriod  time.Duration
	H2HWindow  time.Duration
	H2HSeveral int
	H2HBurn    time.Duration
	H2HWait    time.Duration
	// Host crash: runs per mending rule.
	HostCrashRuns int
	// PropagationNs and PropagationRuns are the propagation part's agent
	// counts and runs per broadcast and count.
	PropagationNs   []int
	PropagationRuns int
	// PropagationGossipStep is the gossips' -gossip-step (-gossip-latency
	// twice that; 0: the agents' defaults).
	PropagationGossipStep time.Duration
}

var us, ms = time.Microsecond, time.Millisecond

// Quick is the profile of `vigil-bench quick`: under 10 minutes on a
// 2-core machine.
var Quick = Profile{
	Name:     "quick",
	IMBRanks: 2, IMBSizes: []int{0, 1, 1 << 10, 64 << 10, 1 << 20, 4 << 20}, IMBMaxReps: 200, IMBTimeLimit: 100 * ms,
	ProbeDuration: time.Second,
	SweepSizes:    []int{0, 1 << 10, 64 << 10}, SweepTimeLimit: 40 * ms, SweepMaxReps: 200,
	SweepHs: DefaultHs, SweepPairs: 6,
	AccuracyRanks: 4, AccuracyHs: []time.Duration{10 * ms, ms, 300 * us, 100 * us}, AccuracyDuration: 1500 * ms,
	AccuracyLoads: []string{Compute, string(PingPong), string(Allreduce)},
	GuardHs:       []time.Duration{ms, 300 * us}, GuardRounds: 2, GuardLoads: []string{Compute},
	LatenessHs: []time.Duration{300 * us}, LatenessDuration: 3 * time.Second, LatenessRounds: 2,
	CostHs: []time.Duration{ms, time.Second}, CostNs: []int{2, 8}, CostTransports: []string{CostUDP, CostSHM}, CostRounds: 2,
	CostWindow: 2 * time.Second, CostMaxWindow: 3 * time.Second,
	SchedHs: []time.Duration{ms, 100 * us}, SchedDuration: time.Second,
	H2HSizes: []int{8, 16}, H2HPeriod: 200 * ms, H2HWindow: 2 * time.Second, H2HSeveral: 3, H2HBurn: 3 * time.Second,
	H2HWait: 15 * time.Second, HostCrashRuns: 5,
	StormKs: []int{1, 16}, StormRuns: 1,
	PropagationNs: []int{16, 32, 64}, PropagationRuns: 3,
}

// Full is the profile of `vigil-bench full` (about 55 minutes on the
// 2-core machine).
var Full = Profile{
	Name:     "full",
	IMBRanks: 2, IMBSizes: IMBSizes(IMBMaxSize), IMBMaxReps: IMBMaxReps, IMBTimeLimit: time.Second,
	ProbeDuration: 5 * time.Second,
	SweepSizes:    IMBSizes(IMBMaxSize), SweepTimeLimit: 200 * ms, SweepMaxReps: IMBMaxReps,
	SweepHs: DefaultHs, SweepPairs: 5,
	AccuracyRanks: 8,
	AccuracyHs: []time.Duration{100 * ms, 30 * ms, 10 * ms, 3 * ms, ms, 500 * us, 300 * us, 200 * us, 100 * us,
		50 * us},
	AccuracyDuration: 10 * time.Second,
	AccuracyLoads:    []string{Compute, string(PingPong), string(Sendrecv), string(Allreduce), string(Bcast)},
	GuardHs:          []time.Duration{ms, 500 * us, 300 * us}, GuardRounds: 3,
	GuardLoads: []string{Compute, string(PingPong)},
	LatenessHs: []time.Duration{ms, 300 * us}, LatenessDuration: 5 * time.Second, LatenessRounds: 3,
	CostHs: []time.Duration{100 * us, ms, 10 * ms, time.Second}, CostNs: []int{2, 8, 32},
	CostTransports: []string{CostUDP, CostSHM}, CostRounds: 3, CostInProcess: true,
	CostWindow: 2 * time.Second, CostMaxWindow: 10 * time.Second,
	SchedHs: []time.Duration{10 * ms, ms, 100 * us}, SchedDuration: 5 * time.Second,
	H2HSizes: []int{8, 16, 32}, H2HPeriod: 200 * ms, H2HWindow: 5 * time.Second, H2HSeveral: 4, H2HBurn: 20 * time.Second,
	H2HWait: 30 * time.Second, HostCrashRuns: 20,
	StormKs: []int{1, 4, 8, 16, 32, 64}, StormRuns: 3,
	PropagationNs: []int{16, 32, 64}, PropagationRuns: 10,
}

// ProfileNamed returns the profile called name.
func ProfileNamed(name string) (Profile, error) {
	switch name {
	case "quick":
		return Quick, nil
	case "full":
		return Full, nil
	}
	return Profile{}, fmt.Errorf("bench: unknown profile %q (want quick or full)", name)
}
