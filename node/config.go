package node

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/settings"
	"github.com/vigil-hpc/vigil/transport"
)

// Config configures one Vigil node. The zero values of the optional fields
// take the documented defaults; Validate names the first bad field.
type Config struct {
	// Rank is this process's rank, Size the job's number of ranks.
	Rank ranks.Rank
	Size int

	// HeartbeatPeriod is h (default 10 ms).
	HeartbeatPeriod time.Duration
	// SuspectTimeout is δ (default 5 × h, at least 100µs). It must exceed
	// HeartbeatPeriod plus the worst message delay and scheduling hiccup the
	// platform shows, or live ranks will be suspected.
	//
	// The timing settings have bounds (package settings, checked by Validate):
	// h from 10µs to 1 minute (50µs with RealTime), δ from max(2 × h,
	// 100µs) to 1 hour, the check period from 10µs to δ, the grace up to 2
	// hours.
	SuspectTimeout time.Duration
	// CheckPeriod is how often the observer checks its emitter's slot
	// word (default δ/8, at least h). The check runs on the heartbeat
	// thread after every ⌈CheckPeriod/h⌉-th heartbeat (rounded to a whole
	// number of periods), so it costs no wake-up; the event loop looks at
	// what the checks saw only when SUSP-TIMEOUT may have expired.
	// Detection takes up to δ plus about two of these.
	CheckPeriod time.Duration
	// StartGrace is how long the first heartbeat of the initial emitter may
	// take after Start (default 2 s + δ), to let every rank come up.
	StartGrace time.Duration

	// Broadcast names the propagation: an overlay, "hba" (default, the
	// double hypercube of seed 000) or "bmg" (the binomial graph of seed
	// 003), or a corrected gossip of seed 002, "ocg", "ccg" or "fcg", or
	// "ctree", the corrected tree (the greedy LogP tree, then FCG's
	// correction). See Broadcasts.
	Broadcast string
	// Gossip tunes the corrected gossips; zero fields take defaults.
	Gossip GossipConfig

	// MendProbe is the block-mending window (hb.RingConfig.Probe): an
	// observer that finds its emitter dead probes this many predecessors
	// at once, doubling each round, so that a dead block of consecutive
	// ranks (a host) is known in about 2δ rather than 2δ per rank
	// (default 16; negative: Algorithm 1's one-at-a-time mending).
	MendProbe int
	// MendEarly, with block mending, probes the emitter's predecessors once
	// the emitter has been silent this long, before it is suspected
	// (hb.RingConfig.ProbeAfter): a dead block is then known about
	// MendEarly + δ after the crash instead of 2δ. Default
	// hb.EarlyProbeAfter(δ, the check interval): the first check at or
	// past 0.4δ that sees no heartbeat, the second in a row at least, at
	// most δ/2 (0.4δ at the default δ = 5×h); negative: probe at the
	// suspicion.
	MendEarly time.Duration
	// Hosts is the host of every rank, indexed by rank (nil: unknown):
	// with block mending, a probe round also probes the rest of its first
	// candidate's host, so a dead host of any size is known in one round
	// (hb.RingConfig.Hosts). Ignored when it names fewer than two hosts.
	// vigil.Join fills it from the bootstrap.
	Hosts []string

	// PinEmitter pins the heartbeat thread to CPU EmitterCPU with
	// sched_setaffinity (default: not pinned).
	PinEmitter bool
	EmitterCPU int
	// RealTime asks for SCHED_FIFO for the heartbeat thread when permitted.
	RealTime bool
	// EmitterHoldsP keeps a Go scheduler P for the heartbeat thread (see
	// heartbeat.EmitterConfig.HoldP): with RealTime, it is what makes
	// heartbeats punctual when the CPUs are saturated. Start raises
	// GOMAXPROCS by one per node that sets it, and Close lowers it back. Use
	// it in processes that run one node (the agent, the C library); not in
	// tests that run hundreds of nodes in one process.
	EmitterHoldsP bool
	// GoEmitter runs the heartbeat thread in Go even where by default it
	// runs in C outside the Go runtime (heartbeat.EmitterConfig.Sink): over
	// shared memory (transport.Worder) with datagrams to other hosts, and
	// over UDP alone with the observer's datagrams authenticated in C
	// (transport.HeartbeatVerifier). For comparisons.
	GoEmitter bool
	// RealTimeProcess, with RealTime, puts every thread of the process
	// under SCHED_RR at priority 1 and the heartbeat thread SCHED_FIFO at 2
	// (heartbeat.SetProcessRealTime): the receive path, the observer's
	// checks and the Go runtime's hand-offs then wait for no
	// normal-priority thread.
	// Only for a process that runs the detector alone (vigil agent), never
	// inside an application. Refused without privilege (logged; the
	// emitter alone is then real-time, as with RealTime).
	RealTimeProcess bool

	// Logger receives the node's logs (default: discarded).
	Logger *slog.Logger

	// AgreeTree is the tree of the agreements (default era.Binary(Size),
	// the paper's binary tree); every rank must use the same one.
	AgreeTree era.Tree
	// AgreeRebalance rebuilds the tree of each Agree and Shrink over the
	// survivors of the previous one (seed 001, Section 4: tree
	// rebalancing), so that the tree stays balanced after failures. It
	// needs AgreeTree to be nil or an *era.HeapTree, and every rank to call
	// Agree and Shrink one at a time (each after the previous returned).
	AgreeRebalance bool
	// AgreeResend is how often agreements still open are nudged: the UPs
	// and RESULTREQUESTs awaiting an answer are sent again (era.Core.Resend),
	// so that a message lost by the transport (TCP drops messages to a peer
	// that is not listening yet, or beyond a full queue) does not stall an
	// agreement. Default 250 ms; negative disables it.
	AgreeResend time.Duration
	// AgreeOps are extra agreement operations, selected by OpCustom+i;
	// every rank must configure the same list.
	AgreeOps []era.Op

	// Partition is what the node does when it holds most of the job's
	// membership dead: it is on the minority side of a partition, or the
	// job lost most of its ranks at once (detector.PartitionMode). By
	// default (detector.PartitionFailStop) it stops: Evicted is closed and
	// Minority reports true. detector.PartitionContinue lets it go on.
	Partition detector.PartitionMode

	// OnNote, if set, receives each note another rank published
	// (Node.Publish), once, on the event loop: it must not block.
	OnNote func(detector.Note)

	// Slots, if set, is the heartbeat slot array the node's observer
	// checks (at least Size words): an RDMA transport's registered
	// memory, which emitters write into (default: transport.NewSlots(Size)).
	Slots *transport.Slots
}

// Defaults (the settings table's).
const (
	DefaultHeartbeatPeriod = settings.DefaultHeartbeatPeriod
	DefaultStartGrace      = settings.DefaultStartGrace
	DefaultAgreeResend     = settings.DefaultAgreeResend
	DefaultMendProbe       = settings.DefaultMendProbe
)

// WithDefaults returns c with its unset optional fields at their
// documented defaults, as Start uses it (for drivers that need the
// effective timing, such as the daemon's hang checks).
func (c Config) WithDefaults() Config { return c.withDefaults() }

// withDefaults fills unset optional fields.
func (c Config) withDefaults() Config {
	if c.HeartbeatPeriod == 0 {
		c.HeartbeatPeriod = DefaultHeartbeatPeriod
	}
	if c.SuspectTimeout == 0 {
		c.SuspectTimeout = max(satMul(c.HeartbeatPeriod, 5), settings.MinSuspectTimeout)
	}
	if c.CheckPeriod == 0 {
		c.CheckPeriod = max(c.SuspectTimeout/8, c.HeartbeatPeriod)
	}
	if c.StartGrace == 0 {
		c.StartGrace = satAdd(DefaultStartGrace, c.SuspectTimeout)
	}
	if c.AgreeResend == 0 {
		c.AgreeResend = DefaultAgreeResend
	}
	if c.MendProbe == 0 {
		c.MendProbe = DefaultMendProbe
	}
	if c.MendEarly == 0 && c.SuspectTimeout > 0 && c.HeartbeatPeriod > 0 {
		check := int64(c.checkEvery()) * int64(c.HeartbeatPeriod)
		c.MendEarly = time.Duration(hb.EarlyProbeAfter(int64(c.SuspectTimeout), check))
	}
	if c.Broadcast == "" {
		c.Broadcast = settings.DefaultBroadcast
	}
	if c.Gossip.Step == 0 {
		c.Gossip.Step = DefaultGossipStep
	}
	if c.Gossip.Latency == 0 {
		c.Gossip.Latency = DefaultGossipLatency
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// checkEvery is CheckPeriod in heartbeat periods (at least 1).
func (c Config) checkEvery() int {
	return max(1, int((c.CheckPeriod+c.HeartbeatPeriod/2)/c.HeartbeatPeriod))
}

// housekeeping is how often the event loop looks for zombies and nudges
// open agreements: δ, between 5 ms and 250 ms (the default AgreeResend).
func (c Config) housekeeping() time.Duration {
	return min(max(c.SuspectTimeout, 5*time.Millisecond), 250*time.Millisecond)
}

// Validate reports the first bad field, after defaults are applied. The
// timing settings are checked against their bounds (the settings table)
// first, and Gossip against bcast.GossipConfig's whatever the Broadcast;
// such an error is a *settings.BoundError, which front ends rename
// (settings.BoundError.In).
func (c Config) Validate() error {
	if err := checkTiming(c, c.withDefaults()); err != nil {
		return err
	}
	c = c.withDefaults()
	switch {
	case c.Size < 1:
		return fmt.Errorf("node: Config.Size = %d, want ≥ 1", c.Size)
	case int64(c.Rank) >= int64(c.Size):
		return fmt.Errorf("node: Config.Rank = %d, want < Size = %d", c.Rank, c.Size)
	case c.MendEarly >= c.SuspectTimeout:
		return fmt.Errorf("node: Config.MendEarly = %v, want below SuspectTimeout = %v (or negative: none)", c.MendEarly, c.SuspectTimeout)
	case c.Hosts != nil && len(c.Hosts) != c.Size:
		return fmt.Errorf("node: Config.Hosts has %d hosts, want one per rank (Size = %d)", len(c.Hosts), c.Size)
	case c.Slots != nil && c.Slots.Len() < c.Size:
		return fmt.Errorf("node: Config.Slots has %d words, want ≥ Size = %d", c.Slots.Len(), c.Size)
	case c.PinEmitter && c.EmitterCPU < 0:
		return fmt.Errorf("node: Config.EmitterCPU = %d, want a CPU number ≥ 0", c.EmitterCPU)
	case c.Partition > detector.PartitionContinue:
		return fmt.Errorf("node: Config.Partition = %v, want PartitionFailStop or PartitionContinue", c.Partition)
	}
	if _, _, err := c.propagation(); err != nil {
		return err
	}
	if _, heap := c.AgreeTree.(*era.HeapTree); c.AgreeRebalance && c.AgreeTree != nil && !heap {
		return fmt.Errorf("node: Config.AgreeRebalance needs AgreeTree to be an *era.HeapTree, not %T", c.AgreeTree)
	}
	for i, op := range c.AgreeOps {
		if op == nil {
			return fmt.Errorf("node: Config.AgreeOps[%d] is nil", i)
		}
	}
	if len(c.AgreeOps) > 255-int(OpCustom) {
		return fmt.Errorf("node: Config.AgreeOps has %d operations, at most %d", len(c.AgreeOps), 255-int(OpCustom))
	}
	return nil
}

// Broadcasts lists the names Config.Broadcast accepts.
var Broadcasts = settings.Broadcasts

// Defaults of GossipConfig (the settings table's).
const (
	DefaultGossipStep    = settings.DefaultGossipStep
	DefaultGossipLatency = settings.DefaultGossipLatency
)

// GossipConfig tunes the corrected gossips (bcast.GossipConfig).
type GossipConfig struct {
	// Step is o, one step of the gossip: a rank sends at most one
	// dissemination and one correction message per step (default
	// DefaultGossipStep).
	Step time.Duration
	// Latency is L, the expected one-way message latency (default
	// DefaultGossipLatency): a message is taken to arrive ⌈L/o⌉ + 1 steps
	// after it was sent, and the correction starts that long after the
	// dissemination's end.
	Latency time.Duration
	// T ends the dissemination (0: seed 002's equations (3)–(5) for the
	// job's size, or the tree's span for ctree).
	T int
	// C is OCG's number of correction messages per g-node (0: equation
	// (3)'s).
	C int
	// F is the number of failures FCG and ctree tolerate during the
	// correction, 1 to 3 (0: 1).
	F int
	// Seed seeds the random gossip targets (0: the clock); tests fix it
	// to replay a broadcast.
	Seed uint64
}

// propagation returns the overlay, or the corrected gossip, that
// c.Broadcast names. c.Gossip is checked whatever the broadcast, against
// bcast.GossipConfig.Validate's bounds (gossipError).
func (c *Config) propagation() (bcast.Overlay, *bcast.GossipConfig, error) {
	g := &bcast.GossipConfig{Step: int64(c.Gossip.Step), Latency: int64(c.Gossip.Latency), T: c.Gossip.T, C: c.Gossip.C, F: c.Gossip.F,
		Seed: c.Gossip.Seed}
	if g.Seed == 0 {
		g.Seed = uint64(time.Now().UnixNano())
	}
	var ov bcast.Overlay
	switch c.Broadcast {
	case "hba":
		ov = bcast.HBA{}
	case "bmg":
		ov = bcast.BMG{}
	case "ocg":
		g.Alg = bcast.OCG
	case "ccg":
		g.Alg = bcast.CCG
	case "fcg":
		g.Alg = bcast.FCG
	case "ctree":
		g.Alg, g.Tree = bcast.FCG, true
	default:
		return nil, nil, fmt.Errorf("node: Config.Broadcast = %q, want one of %s", c.Broadcast, strings.Join(Broadcasts, ", "))
	}
	if err := g.Validate(); err != nil {
		return nil, nil, gossipError(err)
	}
	if ov != nil {
		return ov, nil, nil
	}
	return nil, g, nil
}

// gossipError is a bcast.FieldError of c.Gossip's as the
// *settings.BoundError of its setting; other errors name Config.Gossip.
func gossipError(err error) error {
	fe, ok := errors.AsType[*bcast.FieldError](err)
	if !ok {
		return fmt.Errorf("node: Config.Gossip: %w", err)
	}
	be := &settings.BoundError{Setting: settings.ByGo("node.Config.Gossip." + fe.Field), Value: time.Duration(fe.Value), Want: fe.Want}
	if fe.Other != "" {
		be.Other = settings.ByGo("node.Config.Gossip." + fe.Other)
	}
	return be
}
