package main

import (
	"errors"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/node"
)

// detectorFlags are the node.Config flags shared by run, agent and demo.
type detectorFlags struct {
	h, delta, check, grace time.Duration
	mendEarly              time.Duration
	broadcast, transport   string
	gossip                 node.GossipConfig
	heartbeat, emitter     string
	pin, mendProbe         int
	realtime               bool
	realtimeProcess        bool
	partition              detector.PartitionMode
	log                    logFlags
}

func (d *detectorFlags) register(fs *flag.FlagSet, h, delta time.Duration) {
	durationVar(fs, &d.h, "h", h, "heartbeat period h: 10µs to 1 minute (at least 50µs with -realtime)")
	durationVar(fs, &d.delta, "delta", delta, "suspicion time-out δ: at least twice -h and 100µs, at most 1 hour")
	durationVar(fs, &d.check, "check", 0, "observer check period, run on the heartbeat thread, 10µs to δ (default max(δ/8, h))")
	durationVar(fs, &d.grace, "grace", 0, "start-up grace before the first suspicion, up to 2 hours (default 2s + δ)")
	fs.StringVar(&d.broadcast, "broadcast", "hba", "propagation: hba (double hypercube, seed 000), bmg (binomial graph, seed 003), or a corrected gossip of seed 002: ocg, ccg, fcg, or ctree (greedy LogP tree + FCG's correction); see -gossip-*")
	durationVar(fs, &d.gossip.Step, "gossip-step", node.DefaultGossipStep, "corrected gossips: o, one step (a rank sends at most one gossip and one correction message per step); keep it above the per-message CPU cost times the ranks per core, or a broadcast overloads the host")
	durationVar(fs, &d.gossip.Latency, "gossip-latency", node.DefaultGossipLatency, "corrected gossips: L, the expected one-way message latency (a message counts as arriving ⌈L/o⌉+1 steps after it was sent)")
	fs.IntVar(&d.gossip.T, "gossip-t", 0, "corrected gossips: the gossip (or tree) phase ends at step T (0: seed 002's equations (3)-(5), or the tree's span)")
	fs.IntVar(&d.gossip.C, "gossip-c", 0, "ocg: correction messages per gossip-reached rank (0: seed 002's equation (3))")
	fs.IntVar(&d.gossip.F, "gossip-f", 1, "fcg, ctree: failures tolerated during the correction, 1 to 3")
	fs.StringVar(&d.transport, "transport", "tcp", "transport: tcp, or verbs (RDMA; falls back to tcp when unavailable)")
	fs.StringVar(&d.heartbeat, "heartbeat", "shm", "heartbeat path with -transport tcp: shm (a store into the observer's shared memory for ranks on this host, UDP to other hosts) or udp (UDP datagrams only)")
	fs.StringVar(&d.emitter, "emitter", "native", "heartbeat thread: native (in C, outside the Go runtime, over shared memory and UDP; in Go over verbs) or go (always in Go, for comparisons)")
	fs.IntVar(&d.mendProbe, "mend-probe", node.DefaultMendProbe, "block mending: probe this many predecessors of a dead emitter at once, so a dead host's ranks are known in about 2δ (0: Algorithm 1, one rank per 2δ)")
	durationVar(fs, &d.mendEarly, "mend-early", 0, "block mending: probe the emitter's predecessors once it has been silent this long, before suspecting it (default: the first check at or past 0.4δ without a heartbeat, the second in a row at least, at most δ/2; negative: at the suspicion)")
	fs.IntVar(&d.pin, "pin", -1, "pin the heartbeat thread to this CPU (-1: not pinned)")
	fs.BoolVar(&d.realtime, "realtime", true, "ask for SCHED_FIFO for the heartbeat thread (ignored without privilege)")
	fs.BoolVar(&d.realtimeProcess, "realtime-process", true, "with -realtime, every thread of the agent real-time (SCHED_RR at 1, the heartbeat thread SCHED_FIFO at 2), so that the Go runtime's threads that reschedule the heartbeat goroutine are never starved by the application (node.Config.RealTimeProcess)")
	fs.Var(partitionValue{&d.partition}, "partition", "the `mode` of a rank that holds most of the job dead (the minority side of a partition, or the job lost most ranks at once): failstop, the default (it stops at once: the agent prints an evicted line with reason \"minority partition\" and exits with status 3; an even split goes to the side holding the lowest rank), or continue (it goes on, as before; docs/partitions.md)")
	d.log.register(fs)
}

// partitionValue is the -partition flag (detector.ParsePartitionMode).
type partitionValue struct{ m *detector.PartitionMode }

func (v partitionValue) String() string {
	if v.m == nil {
		return detector.PartitionFailStop.String()
	}
	return v.m.String()
}

func (v partitionValue) Set(s string) error {
	m, err := detector.ParsePartitionMode(s)
	if err != nil {
		return fmt.Errorf("want failstop or continue")
	}
	*v.m = m
	return nil
}

// args renders the flags back for child agents.
func (d *detectorFlags) args() []string {
	a := []string{
		"-h", d.h.String(), "-delta", d.delta.String(), "-broadcast", d.broadcast,
		"-transport", d.transport, "-heartbeat", d.heartbeat, "-emitter", d.emitter, "-pin", strconv.Itoa(d.pin),
		"-check", d.check.String(), "-grace", d.grace.String(), "-mend-probe", strconv.Itoa(d.mendProbe),
		"-mend-early", d.mendEarly.String(),
		"-gossip-step", d.gossip.Step.String(), "-gossip-latency", d.gossip.Latency.String(),
		"-gossip-t", strconv.Itoa(d.gossip.T), "-gossip-c", strconv.Itoa(d.gossip.C), "-gossip-f", strconv.Itoa(d.gossip.F),
	}
	a = append(a, "-realtime="+strconv.FormatBool(d.realtime), "-realtime-process="+strconv.FormatBool(d.realtimeProcess),
		"-partition", d.partition.String())
	return append(a, d.log.args()...)
}

func (d *detectorFlags) config() node.Config {
	c := node.Config{
		HeartbeatPeriod: d.h,
		SuspectTimeout:  d.delta,
		CheckPeriod:     d.check,
		StartGrace:      d.grace,
		Broadcast:       d.broadcast,
		Gossip:          d.gossip,
		MendProbe:       d.mendProbe,
		MendEarly:       d.mendEarly,
		RealTime:        d.realtime,
		RealTimeProcess: d.realtimeProcess,
		EmitterHoldsP:   true, // one node per process
		GoEmitter:       d.emitter == "go",
		Partition:       d.partition,
	}
	if d.pin >= 0 {
		c.PinEmitter, c.EmitterCPU = true, d.pin
	}
	if d.mendProbe == 0 {
		c.MendProbe = -1 // Algorithm 1
	}
	return c
}

// validate checks the flags, naming the flag and value of a bad one; its
// errors are usageErrors.
func (d *detectorFlags) validate(size int) error {
	return asUsage(d.checkValues(size))
}

func (d *detectorFlags) checkValues(size int) error {
	if err := d.log.validate(); err != nil {
		return err
	}
	if d.transport != "tcp" && d.transport != "verbs" {
		return fmt.Errorf("-transport %q: want tcp or verbs", d.transport)
	}
	if d.heartbeat != "shm" && d.heartbeat != "udp" {
		return fmt.Errorf("-heartbeat %q: want shm or udp", d.heartbeat)
	}
	if d.emitter != "native" && d.emitter != "go" {
		return fmt.Errorf("-emitter %q: want native or go", d.emitter)
	}
	if d.mendProbe < 0 {
		return fmt.Errorf("-mend-probe %d: want ≥ 0 (0: Algorithm 1's one-at-a-time mending)", d.mendProbe)
	}
	// The timing's bounds are node.Config.Validate's (node.Settings),
	// named as flags.
	c := d.config()
	c.Size = max(size, 1)
	if err := c.Validate(); err != nil {
		if be, ok := errors.AsType[*node.BoundError](err); ok {
			return errors.New(be.In(node.FlagNames))
		}
	}
	switch {
	case d.mendEarly >= c.WithDefaults().SuspectTimeout:
		return fmt.Errorf("-mend-early %v: want below -delta %v (0: the default; negative: probe at the suspicion)", d.mendEarly, d.delta)
	case d.pin >= runtime.NumCPU():
		return fmt.Errorf("-pin %d: this machine has CPUs 0–%d (-1: not pinned)", d.pin, runtime.NumCPU()-1)
	case d.pin < -1:
		return fmt.Errorf("-pin %d: want a CPU number, or -1 for not pinned", d.pin)
	case !slices.Contains(node.Broadcasts, d.broadcast):
		return fmt.Errorf("-broadcast %q: want one of %s", d.broadcast, strings.Join(node.Broadcasts, ", "))
	case d.gossip.Step <= 0:
		return fmt.Errorf("-gossip-step %v: want > 0, such as 100µs", d.gossip.Step)
	case d.gossip.Latency < 0:
		return fmt.Errorf("-gossip-latency %v: want ≥ 0", d.gossip.Latency)
	case d.gossip.T < 0:
		return fmt.Errorf("-gossip-t %d: want ≥ 0 (0: planned)", d.gossip.T)
	case d.gossip.C < 0:
		return fmt.Errorf("-gossip-c %d: want ≥ 0 (0: planned)", d.gossip.C)
	case d.gossip.F < 1 || d.gossip.F > 3:
		return fmt.Errorf("-gossip-f %d: want 1 to 3", d.gossip.F)
	}
	c.Size = size
	return c.Validate()
}

// durationValue is a time.Duration flag whose error says that a unit is
// needed ("-h 10" is not 10 ms).
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration with a unit, such as 10ms, 500us or 2s")
	}
	*v.d = d
	return nil
}

// durationVar defines a duration flag with durationValue's error.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(durationValue{p}, name, usage+"; a `duration` with a unit")
}

// duration is durationVar returning the variable.
func duration(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	durationVar(fs, p, name, def, usage)
	return p
}
