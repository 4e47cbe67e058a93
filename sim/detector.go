package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// HeartbeatMode says how the detector simulation treats heartbeats.
type HeartbeatMode uint8

const (
	// HeartbeatsSkip does not simulate individual heartbeats (seed 000
	// §4.1): an observer is evaluated only when its emitter dies or stops
	// heartbeating it, or when its suspicion deadline comes, and the last
	// heartbeat that reached it is computed in closed form from the
	// emitter's period, phase, observer history and the per-heartbeat
	// delays. It produces exactly the run HeartbeatsFull produces (same
	// detections at the same times) at a cost independent of h.
	HeartbeatsSkip HeartbeatMode = iota
	// HeartbeatsFull simulates every heartbeat (task T1) and every check.
	HeartbeatsFull
)

func (m HeartbeatMode) String() string {
	if m == HeartbeatsFull {
		return "full"
	}
	return "skip"
}

// DetectorConfig describes one simulated job running Vigil's detector: N
// ranks, each running the shipped detector.Core (the ring of seed 000
// Algorithm 1, optionally with block mending, the broadcast, the dead-list
// repair and the eviction of zombies), exchanging NEWOBSERVER, broadcast,
// SYNC and (block mending) PROBE and ALIVE messages over Net.
// The simulator supplies the heartbeats, the checks, the network and the
// failures; every protocol decision is the Core's. Times are nanoseconds.
type DetectorConfig struct {
	N int
	// H is the heartbeat period h and Delta the suspicion time-out δ.
	H, Delta int64
	// Check is the observer's check period (the node runtime's
	// CheckPeriod). 0 means a timer, as in Algorithm 1: the observer acts
	// on each heartbeat from its emitter and when SUSP-TIMEOUT expires.
	Check int64
	// Net is the network model (default OnePort{T: 1 ms}).
	Net Network
	// Overlay is the broadcast overlay (default bcast.HBA).
	Overlay bcast.Overlay
	// Heartbeats selects full or skipped heartbeats (default skip).
	Heartbeats HeartbeatMode
	// HeartbeatPorts makes heartbeats occupy the sender's and receiver's
	// ports like any message (HeartbeatsFull only). Off, a heartbeat is an
	// RDMA put that takes a time in (0, HeartbeatDelay] and contends with
	// nothing, which is what HeartbeatsSkip assumes.
	HeartbeatPorts bool
	// HeartbeatDelay bounds one heartbeat's transfer time (default
	// Net.Bound()).
	HeartbeatDelay int64
	// Failures is the failure plan (required).
	Failures FailurePlan
	// Probe is the block-mending window W (detector.Config.Probe,
	// hb/mend.go): an observer that finds its emitter dead probes its next
	// W predecessors at once (PROBE/ALIVE, time-out δ), doubling W each
	// round that finds no live one, so a dead block of consecutive ranks is
	// known in about 2δ instead of 2δ per rank. 0 (the default) is
	// Algorithm 1's one-at-a-time mending.
	Probe int
	// ProbeAfter, with Probe, probes the emitter's predecessors once it has
	// been silent that long, before its suspicion (detector.Config.
	// ProbeAfter; the node runtime's default is hb.EarlyProbeAfter of δ
	// and its check interval). 0: at the suspicion.
	ProbeAfter int64
	// Hosts, with Probe, labels the host of every rank (detector.Config.
	// Hosts, len N; shared by every Core): a probe round takes in the rest
	// of its first candidate's host. nil: no labels.
	Hosts []uint32
	// Partition is what a rank holding most of its membership dead does
	// (detector.Config.Partition; the zero value stops it, as the runtime
	// does). The crash studies set PartitionContinue: they measure how
	// survivors learn of a crash of half the job or more, which under the
	// default is a minority stop by design (docs/partitions.md).
	Partition detector.PartitionMode
	// Start is the time of the failure phase, after the ring reached its
	// steady state (default 2×h + Check + the heartbeat delay bound).
	Start int64
	// Horizon bounds the simulated time after Start (default 1000 δ).
	Horizon int64
	// Exhaustive hands every copy of a broadcast to the receiving Core; by
	// default a copy reaching a rank that already delivered that broadcast
	// only occupies the ports (the Core would drop it as a duplicate, or,
	// if it holds the sender dead, answer EVICTED, which is then not
	// simulated).
	Exhaustive bool
	// Trace, if set, receives the protocol events in order.
	Trace func(TraceEvent)
}

func (c *DetectorConfig) withDefaults() DetectorConfig {
	d := *c
	if d.Net == nil {
		d.Net = OnePort{T: int64(time.Millisecond)}
	}
	if d.Overlay == nil {
		d.Overlay = bcast.HBA{}
	}
	if d.HeartbeatDelay == 0 {
		d.HeartbeatDelay = d.Net.Bound()
	}
	if d.Start == 0 {
		d.Start = 2*d.H + d.Check + d.HeartbeatDelay
	}
	if d.Horizon == 0 {
		d.Horizon = 1000 * d.Delta
	}
	return d
}

// Validate reports the first bad field.
func (c *DetectorConfig) Validate() error {
	d := c.withDefaults()
	switch {
	case d.N < 2:
		return fmt.Errorf("sim: DetectorConfig.N = %d, want ≥ 2", d.N)
	case d.N > 1<<31:
		return fmt.Errorf("sim: DetectorConfig.N = %d is too large", d.N)
	case d.H <= 0:
		return fmt.Errorf("sim: DetectorConfig.H = %d, want > 0", d.H)
	case d.Check < 0:
		return fmt.Errorf("sim: DetectorConfig.Check = %d, want ≥ 0", d.Check)
	case d.HeartbeatDelay <= 0 || d.HeartbeatDelay >= d.H:
		return fmt.Errorf("sim: DetectorConfig.HeartbeatDelay = %d, want in (0, h = %d)", d.HeartbeatDelay, d.H)
	case d.Delta <= d.H+d.HeartbeatDelay+d.Check:
		return fmt.Errorf("sim: DetectorConfig.Delta = %d, want > h + heartbeat delay + check period = %d (else live ranks are suspected)",
			d.Delta, d.H+d.HeartbeatDelay+d.Check)
	case d.Failures == nil:
		return errors.New("sim: DetectorConfig.Failures is nil")
	case d.Probe < 0:
		return fmt.Errorf("sim: DetectorConfig.Probe = %d, want ≥ 0", d.Probe)
	case d.Hosts != nil && len(d.Hosts) != d.N:
		return fmt.Errorf("sim: DetectorConfig.Hosts has %d labels, want N = %d", len(d.Hosts), d.N)
	case d.ProbeAfter < 0 || d.ProbeAfter >= d.Delta:
		return fmt.Errorf("sim: DetectorConfig.ProbeAfter = %d, want 0 or below Delta = %d", d.ProbeAfter, d.Delta)
	case d.Start < d.H+d.HeartbeatDelay+d.Check:
		return fmt.Errorf("sim: DetectorConfig.Start = %d, want ≥ h + heartbeat delay + check period", d.Start)
	case d.Heartbeats == HeartbeatsSkip && d.alarm() <= d.H+d.HeartbeatDelay+d.Check:
		return fmt.Errorf("sim: the checks' alarm (ProbeAfter = %d) must exceed h + heartbeat delay + check period = %d with skipped heartbeats (else a live emitter rings it)",
			d.alarm(), d.H+d.HeartbeatDelay+d.Check)
	case d.Heartbeats == HeartbeatsSkip && d.HeartbeatPorts:
		return errors.New("sim: HeartbeatPorts needs HeartbeatsFull")
	}
	return nil
}

// TraceKind names a traced event.
type TraceKind uint8

// Traced events.
const (
	// TraceFail: Node crashed.
	TraceFail TraceKind = iota + 1
	// TraceDetect: Node's ring found its emitter Rank dead (task T3), or
	// found Rank dead by a probe round of block mending, and starts a
	// broadcast.
	TraceDetect
	// TraceLearn: Node learned that Rank, detected by Source, is dead:
	// from the broadcast Source started (task T5) or from a SYNC answer of
	// the dead-list repair.
	TraceLearn
	// TraceNewObserver: Node got NEWOBSERVER from Source.
	TraceNewObserver
	// TraceStable: the configuration is stable (seed 000 §3.1.3).
	TraceStable
)

// TraceEvent is one traced protocol event.
type TraceEvent struct {
	At     int64
	Kind   TraceKind
	Node   ranks.Rank
	Rank   ranks.Rank
	Source ranks.Rank
}

// DetectorResult summarises one run. Durations are measured from the first
// failure.
type DetectorResult struct {
	// Failures is the number of ranks that crashed before the end of the
	// run (the first stable configuration after the planned failures).
	Failures int
	// FirstKnown is the time until every alive rank knew the first failure,
	// -1 if that never happened within the horizon.
	FirstKnown int64
	// AllKnown is the time until every alive rank first knew every crashed
	// rank (and no live one) after the last planned failure, -1 if that
	// never happened within the horizon. It is Stabilized without the
	// ring's reconnection.
	AllKnown int64
	// Stabilized is the time until the first stable configuration after
	// every planned failure (every alive rank observes its closest alive
	// predecessor, is observed by its closest alive successor and knows
	// exactly the dead ranks), -1 if not reached within the horizon.
	Stabilized int64
	// LastFailure is the time of the last failure.
	LastFailure int64
	// Detections counts the broadcasts the rings started: T3 detections
	// and, with block mending, the reports of the probe rounds that found
	// dead candidates.
	Detections int
	// BcastMsgs, NewObserverMsgs and Heartbeats count messages sent
	// (heartbeats only in HeartbeatsFull). BcastForwarded counts the
	// broadcast messages sent by ranks other than the broadcast's source.
	BcastMsgs, BcastForwarded, NewObserverMsgs, Heartbeats uint64
	// SyncMsgs counts the dead-list repair's SYNC messages (requests and
	// answers), ProbeMsgs block mending's PROBE and ALIVE messages,
	// OtherMsgs any other message the Cores sent (EVICTED notices to ranks
	// held dead that still sent something).
	SyncMsgs, ProbeMsgs, OtherMsgs uint64
	// Evicted counts live ranks that were told the job holds them dead and
	// stopped, as a crashed rank would (they count in Failures too).
	Evicted int
	// FalseSuspicions counts live ranks added to some D_i.
	FalseSuspicions int
	// Events is the number of events processed.
	Events uint64
	// Dead lists the crashed ranks in increasing order.
	Dead []ranks.Rank
}

// Event kinds of the detector, in their order at equal times: a check
// sees the heartbeats that landed at its time, and a Set made at a check's
// time is applied by the next check.
const (
	evFail     uint8 = iota // Node crashes (A = 1: draw an alive victim)
	evHbArrive              // heartbeat B from A lands at Node (full)
	evWatch                 // Node's periodic check (A = 1: full, Check > 0) or its checks' alarm as predicted (A = 2, B = stamp)
	evNewObs                // NEWOBSERVER delivered to Node from A
	evBcast                 // broadcast A delivered to Node from B
	evMsg                   // message A of the in-flight table delivered to Node from B
	evWake                  // the wake the Node's Core asked for (detector.Core.NextWake; B = stamp)
	evHbTick                // Node's heartbeat period (full)
)

// obsChange records one retargeting of an emitter: from time at on it
// heartbeats obs, and it sent obs heartbeat number seq at once (T4).
type obsChange struct {
	at  int64
	obs uint32
	seq uint64
}

type dnode struct {
	core  *detector.Core
	alive bool
	death int64

	// Emitter side.
	phase   int64       // periodic heartbeats at phase + k h
	hbSeq   uint64      // full: last sequence number sent
	changes []obsChange // observer history, changes[0] is the initial one

	// Observer side (observe.go).
	cphase   int64  // checks at cphase + k c
	since    int64  // when the current emitter was set (watch.set)
	slot     uint64 // largest sequence number landed from the current emitter since
	lastSent int64  // skip: send time of the heartbeat that set slot
	w        watch  // the heartbeat thread's checks: their record and alarm
	// The pending evWake and alarm evWatch: their times (0: none) and
	// validity stamps.
	wakeAt, alarmAt       int64
	wakeStamp, alarmStamp uint64
	dormant               bool // skip: no alarm can ring, the emitter is heartbeating us
	deferred              bool // a turn of the driver waits for the messages being handled

	mutedUntil int64 // full: heartbeats sent before this are lost (Failure.Mute)

	ok        bool // reconnected (seed 000 §3.1.3)
	knownDead int  // |D_i ∩ dead|
}

type bcastRec struct {
	msg *wire.Bcast
	got []uint64 // ranks that delivered it
}

// Detector is one simulated run of the failure detector. Make it with
// NewDetector and call Run once.
type Detector struct {
	cfg   DetectorConfig
	seed  uint64
	en    Engine
	ports Ports
	nodes []dnode
	death []int64 // nodes[i].death, packed for the hot paths
	// prevLink and nextLink skip dead ranks towards the first live rank
	// before and after each rank (aliveFrom).
	prevLink, nextLink []uint32

	frng  *rand.Rand // failures
	fixed []Failure
	mtbf  int64
	nFail int // fixed failures injected

	bcasts  []bcastRec
	bcastAt map[bcast.ID]uint32 // index in bcasts

	// Messages other than NEWOBSERVER and broadcasts in flight, by the A
	// of their evMsg, and the free entries.
	msgs     []wire.Message
	freeMsgs []uint32

	// Stability accounting.
	alive, deadCount int
	knowSum          int // Σ over alive ranks of |D_i ∩ dead|
	falseCount       int // Σ over alive ranks of |D_i ∩ alive|
	okCount          int
	first            int64 // rank of the first failure, -1 before
	knowFirst        int   // alive ranks knowing the first failure

	res  DetectorResult
	done bool
}

// NewDetector builds the run of cfg with the given seed.
func NewDetector(cfg DetectorConfig, seed uint64) (*Detector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	d := &Detector{cfg: c, seed: seed, first: -1, bcastAt: map[bcast.ID]uint32{}}
	n := c.N
	d.ports = c.Net.NewPorts(n, newRand(seed, streamNet))
	d.frng = newRand(seed, streamFailures)
	d.fixed, d.mtbf = c.Failures.plan(n, d.frng)
	prng := newRand(seed, streamPhases)
	d.nodes = make([]dnode, n)
	d.death = make([]int64, n)
	d.prevLink, d.nextLink = make([]uint32, n), make([]uint32, n)
	for i := range n {
		d.prevLink[i], d.nextLink[i] = uint32((i+n-1)%n), uint32((i+1)%n)
	}
	d.alive = n
	alarm := c.alarm()
	for i := range d.nodes {
		core, err := detector.NewCore(detector.Config{Self: ranks.Rank(i), Size: n, SuspectTimeout: c.Delta, Overlay: c.Overlay,
			Probe: c.Probe, ProbeAfter: c.ProbeAfter, Hosts: c.Hosts, CheckPeriod: c.Check, Alarm: alarm, Partition: c.Partition})
		if err != nil {
			return nil, err
		}
		core.Start(0, c.Delta)
		// The first Ready points the heartbeats at the initial observer
		// (changes[0] below) and the checks at the initial emitter (since
		// = 0, applied): nothing else to do.
		rd := core.Ready()
		nd := &d.nodes[i]
		nd.w = watch{rec: hb.WatchRecord{Emitter: rd.Emitter}, silence: alarm}
		if c.Check > 0 && c.Heartbeats == HeartbeatsFull {
			nd.w.guard = max(c.Delta/2, 3*c.Check) // the node runtime's
		}
		nd.core = core
		nd.alive = true
		nd.death = 1<<62 - 1
		d.death[i] = nd.death
		nd.phase = prng.Int64N(c.H)
		if c.Check > 0 {
			nd.cphase = prng.Int64N(c.Check)
		}
		nd.changes = []obsChange{{at: 0, obs: uint32(core.Observer())}}
		nd.lastSent = -1
		nd.ok = true
	}
	d.okCount = n
	for i := range d.nodes {
		nd := &d.nodes[i]
		if c.Heartbeats == HeartbeatsFull {
			d.en.Schedule(Event{At: nd.phase, Kind: evHbTick, Node: uint32(i)})
			if c.Check > 0 {
				d.en.Schedule(Event{At: nd.cphase, Kind: evWatch, Node: uint32(i), A: 1})
			}
		}
		d.drive(uint32(i), 0) // the driver's first look, as node.Start's loop
	}
	for _, f := range d.fixed {
		if int64(f.Rank) >= int64(n) {
			return nil, fmt.Errorf("sim: failure of rank %d, want < N = %d", f.Rank, n)
		}
		if f.Mute < 0 || (f.Mute > 0 && c.Heartbeats != HeartbeatsFull) {
			return nil, fmt.Errorf("sim: a mute spell of rank %d (%d ns) needs Heartbeats = HeartbeatsFull and a positive duration", f.Rank, f.Mute)
		}
		d.en.Schedule(Event{At: c.Start + f.At, Kind: evFail, Node: uint32(f.Rank), B: uint64(f.Mute)})
	}
	return d, nil
}

// Run simulates until the first stable configuration after the planned
// failures, or the horizon, and returns the result.
func (d *Detector) Run() DetectorResult {
	if d.done {
		return d.res
	}
	d.res.FirstKnown, d.res.AllKnown, d.res.Stabilized = -1, -1, -1
	end := d.cfg.Start + d.cfg.Horizon
	for {
		e, ok := d.en.Next(end)
		if !ok {
			break
		}
		d.handle(e)
		if d.res.AllKnown < 0 && d.allKnown() {
			d.res.AllKnown = d.en.Now - d.cfg.Start
		}
		if d.stable() {
			d.res.Stabilized = d.en.Now - d.cfg.Start
			d.trace(TraceEvent{At: d.en.Now, Kind: TraceStable})
			break
		}
	}
	d.done = true
	d.res.Failures = d.deadCount
	d.res.Events = d.en.Processed
	for i := range d.nodes {
		if !d.nodes[i].alive {
			d.res.Dead = append(d.res.Dead, ranks.Rank(i))
		}
	}
	return d.res
}

// Ring returns rank r's observation ring and whether r is alive, for
// inspection after Run.
func (d *Detector) Ring(r ranks.Rank) (*hb.Ring, bool) {
	return d.nodes[r].core.Ring(), d.nodes[r].alive
}

// Core returns rank r's detector and whether r is alive, for inspection
// after Run.
func (d *Detector) Core(r ranks.Rank) (*detector.Core, bool) {
	return d.nodes[r].core, d.nodes[r].alive
}

func (d *Detector) trace(ev TraceEvent) {
	if d.cfg.Trace != nil {
		d.cfg.Trace(ev)
	}
}

func (d *Detector) skip() bool { return d.cfg.Heartbeats == HeartbeatsSkip }

func (d *Detector) handle(e Event) {
	now := e.At
	switch e.Kind {
	case evFail:
		if e.A == 1 {
			d.randomFailure(now)
			return
		}
		d.nFail++
		if e.B > 0 { // a mute spell: its heartbeats are lost meanwhile
			d.nodes[e.Node].mutedUntil = now + int64(e.B)
		} else {
			d.kill(e.Node, now)
		}
		if d.nFail == len(d.fixed) && d.mtbf > 0 {
			d.scheduleRandomFailure(now)
		}
	case evNewObs:
		if d.wasSent(e) {
			d.onNewObserver(e.Node, e.A, now)
		}
	case evBcast:
		if d.wasSent(e) {
			d.onBcast(e.Node, e.A, uint32(e.B), now)
		}
	case evMsg:
		m := d.msgs[e.A]
		d.msgs[e.A] = nil
		d.freeMsgs = append(d.freeMsgs, e.A)
		if d.wasSent(e) && d.nodes[e.Node].alive {
			d.step(e.Node, uint32(e.B), m, now)
		}
	case evHbArrive:
		d.onHeartbeat(e.Node, e.A, e.B, now)
	case evWatch:
		d.onWatch(e, now)
	case evWake:
		nd := &d.nodes[e.Node]
		if e.A == 1 { // a turn that waited for the messages being handled
			if nd.alive {
				d.drive(e.Node, now)
			}
			return
		}
		if nd.alive && e.B == nd.wakeStamp {
			nd.wakeAt = 0
			d.drive(e.Node, now)
		}
	case evHbTick:
		d.onTick(e.Node, now)
	}
}

// msgTag packs a message's sender and how long before delivery the sender
// was done with it into an event's B.
func msgTag(from uint32, sent, at int64) uint64 {
	return uint64(from) | uint64(at-sent)<<32
}

// wasSent reports whether the sender of message event e lived until it was
// done sending it: a rank that crashes in the middle of a send loses it.
func (d *Detector) wasSent(e Event) bool {
	from := uint32(e.B)
	return d.death[from] > e.At-int64(e.B>>32)
}

// --- failures ---------------------------------------------------------

func (d *Detector) scheduleRandomFailure(now int64) {
	if d.alive <= 1 {
		return
	}
	lambda := float64(d.alive) / float64(d.mtbf)
	d.en.Schedule(Event{At: now + expTime(d.frng, lambda), Kind: evFail, A: 1})
}

func (d *Detector) randomFailure(now int64) {
	if d.alive <= 1 {
		return
	}
	for {
		v := uint32(d.frng.IntN(len(d.nodes)))
		if d.nodes[v].alive {
			d.kill(v, now)
			break
		}
	}
	d.scheduleRandomFailure(now)
}

func (d *Detector) kill(x uint32, now int64) {
	nd := &d.nodes[x]
	if !nd.alive {
		return
	}
	d.knowSum -= nd.knownDead
	if nd.ok {
		d.okCount--
	}
	if d.first >= 0 && nd.core.Dead().Has(ranks.Rank(d.first)) {
		d.knowFirst--
	}
	nd.alive = false
	nd.death = now
	d.death[x] = now
	d.alive--
	d.deadCount++
	if d.first < 0 {
		d.first = int64(x)
	}
	d.res.LastFailure = now - d.cfg.Start
	if d.falseCount > 0 {
		// Ranks that suspected x while it lived were wrong then and are
		// right now.
		for i := range d.nodes {
			o := &d.nodes[i]
			if o.alive && o.core.Dead().Has(ranks.Rank(x)) {
				d.falseCount--
				o.knownDead++
				d.knowSum++
			}
		}
	}
	d.trace(TraceEvent{At: now, Kind: TraceFail, Node: ranks.Rank(x)})
	if d.alive == 0 {
		return
	}
	pr, su := d.predAlive(x), d.succAlive(x)
	d.recomputeOK(pr)
	d.recomputeOK(su)
	if d.skip() {
		// The observer of x stops receiving heartbeats: evaluate it.
		if q := &d.nodes[su]; q.core.Emitter() == ranks.Rank(x) {
			d.wake(su, now)
		}
	}
}

// --- stability accounting ---------------------------------------------

func (d *Detector) stable() bool {
	return d.allKnown() && d.okCount == d.alive
}

// allKnown: every planned failure happened and every alive rank knows
// exactly the dead ranks.
func (d *Detector) allKnown() bool {
	return d.deadCount > 0 && d.nFail == len(d.fixed) && d.alive*d.deadCount == d.knowSum && d.falseCount == 0
}

// learned records that alive rank p added x to D_p.
func (d *Detector) learned(p uint32, x ranks.Rank, now int64) {
	nd := &d.nodes[p]
	if d.nodes[x].alive {
		d.falseCount++
		d.res.FalseSuspicions++
		return
	}
	nd.knownDead++
	d.knowSum++
	if int64(x) == d.first {
		d.knowFirst++
		if d.knowFirst == d.alive && d.res.FirstKnown < 0 {
			d.res.FirstKnown = now - d.cfg.Start
		}
	}
}

// predAlive returns the first live rank before p on the ring (p if none).
func (d *Detector) predAlive(p uint32) uint32 {
	n := uint32(len(d.nodes))
	return d.aliveFrom(d.prevLink, (p+n-1)%n, p)
}

// succAlive returns the first live rank after p on the ring (p if none).
func (d *Detector) succAlive(p uint32) uint32 {
	return d.aliveFrom(d.nextLink, (p+1)%uint32(len(d.nodes)), p)
}

// aliveFrom returns the first live rank from k on, in the direction of
// link, stopping at p. link[r] of a dead rank r lies between r and the
// first live rank after it in that direction, or is it: ranks never come
// back, so the links jump over dead ranks only, and the walk compresses
// them (each rank's link then names the live rank found), so that a burst
// of k adjacent deaths does not cost k steps a question.
func (d *Detector) aliveFrom(link []uint32, k, p uint32) uint32 {
	if d.alive == 0 {
		return p
	}
	r := k
	for r != p && !d.nodes[r].alive {
		r = link[r]
	}
	for k != r && k != p {
		k, link[k] = link[k], r
	}
	return r
}

func (d *Detector) recomputeOK(p uint32) {
	nd := &d.nodes[p]
	if !nd.alive {
		return
	}
	ok := nd.core.Emitter() == d.predAlive(p) && nd.core.Observer() == d.succAlive(p)
	if ok != nd.ok {
		nd.ok = ok
		if ok {
			d.okCount++
		} else {
			d.okCount--
		}
	}
}

// --- the Core's inputs and outputs -------------------------------------

// coreTime is the simulated time t as the Core reads its clocks.
func coreTime(t int64) detector.Time { return detector.Time{Mono: t, Wall: t} }

// step hands message m from rank from to rank q's Core, carries out the
// Ready, and goes round the driver's loop (drive), as the runtime does
// after each message.
func (d *Detector) step(q, from uint32, m wire.Message, now int64) {
	core := d.nodes[q].core
	bad := core.Stats().BadMessages
	core.Step(coreTime(now), ranks.Rank(from), m)
	if core.Stats().BadMessages != bad {
		if _, ok := m.(*wire.Evicted); !ok { // an EVICTED may race with its sender's death
			panic(fmt.Sprintf("sim: rank %d's core rejected %T from %d: %v", q, m, from, core.Ready().Logs))
		}
	}
	d.flush(q, now, false)
	if d.nodes[q].alive {
		d.drive(q, now)
	}
}

// flush carries out what rank q's Core asked for after an input at now:
// point the heartbeats, set the checks on a new emitter, send, record the
// ranks learned gone. byCheck says the input was the checks' record
// (drive), so that the events of q's own detections are told apart.
func (d *Detector) flush(q uint32, now int64, byCheck bool) {
	nd := &d.nodes[q]
	rd := nd.core.Ready()
	if rd.Retarget {
		d.retarget(q, uint32(rd.Observer), now)
	}
	if rd.Watch {
		// The emitter changed: heartbeats from the new one count from now,
		// and the next check sets the record on it.
		nd.since, nd.slot, nd.lastSent = now, 0, -1
		nd.w.set(rd.Emitter, now)
		nd.dormant = false
	}
	for _, s := range rd.Sends {
		d.send(q, s, now)
	}
	for _, ev := range rd.Events {
		if byCheck && ev.Detector == ranks.Rank(q) {
			d.trace(TraceEvent{At: now, Kind: TraceDetect, Node: ranks.Rank(q), Rank: ev.Rank})
			d.learned(q, ev.Rank, now)
			continue
		}
		d.learned(q, ev.Rank, now)
		d.trace(TraceEvent{At: now, Kind: TraceLearn, Node: ranks.Rank(q), Rank: ev.Rank, Source: ev.Detector})
	}
	d.recomputeOK(q)
	if rd.Evicted {
		// The job holds q dead: it stops, as a crashed rank would.
		d.res.Evicted++
		d.kill(q, now)
	}
}

// retarget is the emitter thread's reaction to Ready.Retarget: heartbeat
// the new observer obs at once (T4, HB-TIMEOUT ← 0); obs is p itself when
// p is alone.
func (d *Detector) retarget(p, obs uint32, now int64) {
	nd := &d.nodes[p]
	old := nd.changes[len(nd.changes)-1].obs
	var seq uint64
	if d.skip() {
		seq = d.ticksBefore(nd, now) + uint64(len(nd.changes))
	} else {
		nd.hbSeq++
		seq = nd.hbSeq
	}
	nd.changes = append(nd.changes, obsChange{at: now, obs: obs, seq: seq})
	if !d.skip() {
		if obs != p {
			d.sendHeartbeat(p, obs, seq, now)
		}
		return
	}
	if old != obs && old != p && d.nodes[old].alive && d.nodes[old].core.Emitter() == ranks.Rank(p) {
		d.wake(old, now)
	}
}

// send transfers message s from rank q to each rank of s.To through the
// network model.
func (d *Detector) send(q uint32, s detector.Send, now int64) {
	switch m := s.Msg.(type) {
	case *wire.NewObserver:
		for _, r := range s.To {
			to := uint32(r)
			alive := d.nodes[to].alive
			sent, at := d.ports.Transfer(now, q, to, alive)
			d.res.NewObserverMsgs++
			if alive {
				d.en.Schedule(Event{At: at, Kind: evNewObs, Node: to, A: q, B: msgTag(q, sent, at)})
			}
		}
	case *wire.Bcast:
		idx, ok := d.bcastAt[m.ID]
		if !ok { // q starts it
			idx = uint32(len(d.bcasts))
			d.bcastAt[m.ID] = idx
			d.bcasts = append(d.bcasts, bcastRec{msg: m, got: make([]uint64, (len(d.nodes)+63)/64)})
			d.bcasts[idx].got[q/64] |= 1 << (q % 64)
		} else {
			d.res.BcastForwarded += uint64(len(s.To))
		}
		d.sendBcast(q, idx, s.To, now)
	default:
		for _, r := range s.To {
			to := uint32(r)
			alive := d.death[to] > now
			sent, at := d.ports.Transfer(now, q, to, alive)
			switch m.(type) {
			case *wire.Sync:
				d.res.SyncMsgs++
			case *wire.Probe, *wire.Alive:
				d.res.ProbeMsgs++
			default:
				d.res.OtherMsgs++
			}
			if alive {
				d.en.Schedule(Event{At: at, Kind: evMsg, Node: to, A: d.inFlight(m), B: msgTag(q, sent, at)})
			}
		}
	}
}

// inFlight stores m in the table of messages in flight and returns its
// index.
func (d *Detector) inFlight(m wire.Message) uint32 {
	if k := len(d.freeMsgs); k > 0 {
		i := d.freeMsgs[k-1]
		d.freeMsgs = d.freeMsgs[:k-1]
		d.msgs[i] = m
		return i
	}
	d.msgs = append(d.msgs, m)
	return uint32(len(d.msgs) - 1)
}

func (d *Detector) onNewObserver(to, from uint32, now int64) {
	if !d.nodes[to].alive {
		return
	}
	d.trace(TraceEvent{At: now, Kind: TraceNewObserver, Node: ranks.Rank(to), Source: ranks.Rank(from)})
	d.step(to, from, &wire.NewObserver{Observer: ranks.Rank(from)}, now)
}

// --- broadcasts ---------------------------------------------------------

func (d *Detector) sendBcast(from, idx uint32, to []ranks.Rank, now int64) {
	got := d.bcasts[idx].got
	for _, r := range to {
		r := uint32(r)
		alive := d.death[r] > now
		sent, at := d.ports.Transfer(now, from, r, alive)
		d.res.BcastMsgs++
		if alive && (d.cfg.Exhaustive || got[r/64]&(1<<(r%64)) == 0) {
			d.en.Schedule(Event{At: at, Kind: evBcast, Node: r, A: idx, B: msgTag(from, sent, at)})
		}
	}
}

func (d *Detector) onBcast(q, idx, from uint32, now int64) {
	rec := &d.bcasts[idx]
	already := rec.got[q/64]&(1<<(q%64)) != 0
	if (already && !d.cfg.Exhaustive) || d.death[q] <= now {
		return
	}
	// The Core delivers the broadcast (task T5) unless it is a duplicate
	// or comes from a rank q holds dead (not departed), which it evicts
	// instead.
	if core := d.nodes[q].core; !core.Dead().Has(ranks.Rank(from)) {
		rec.got[q/64] |= 1 << (q % 64)
	} else if ev, _ := core.Known(ranks.Rank(from)); ev.Left {
		rec.got[q/64] |= 1 << (q % 64)
	}
	d.step(q, from, rec.msg, now)
}

// --- heartbeats, full mode -----------------------------------------------

func (d *Detector) hbDelay(p uint32, seq uint64) int64 {
	return 1 + int64(hash3(d.seed^0x6862, uint64(p), seq)%uint64(d.cfg.HeartbeatDelay))
}

func (d *Detector) onTick(p uint32, now int64) {
	nd := &d.nodes[p]
	if !nd.alive {
		return
	}
	nd.hbSeq++
	if obs := uint32(nd.core.Observer()); obs != p {
		d.sendHeartbeat(p, obs, nd.hbSeq, now)
	}
	d.en.Schedule(Event{At: now + d.cfg.H, Kind: evHbTick, Node: p})
}

func (d *Detector) sendHeartbeat(p, q uint32, seq uint64, now int64) {
	d.res.Heartbeats++
	if now < d.nodes[p].mutedUntil {
		return // lost: p is in a mute spell
	}
	alive := d.nodes[q].alive
	var at int64
	if d.cfg.HeartbeatPorts {
		_, at = d.ports.Transfer(now, p, q, alive)
	} else {
		at = now + d.hbDelay(p, seq)
	}
	if alive {
		d.en.Schedule(Event{At: at, Kind: evHbArrive, Node: q, A: p, B: seq})
	}
}

// onHeartbeat stores a heartbeat of the current emitter in q's slot word;
// with continuous checks (Check = 0) a check sees it at once.
func (d *Detector) onHeartbeat(q, p uint32, seq uint64, now int64) {
	nd := &d.nodes[q]
	if !nd.alive || nd.core.Emitter() != ranks.Rank(p) || seq <= nd.slot {
		return
	}
	nd.slot = seq
	if d.cfg.Check == 0 {
		nd.w.check(now, nd.word) // a growth: no alarm
	}
}

// --- heartbeats, skipped ---------------------------------------------------

// ticksBefore returns the number of periodic heartbeats nd sent strictly
// before time t.
func (d *Detector) ticksBefore(nd *dnode, t int64) uint64 {
	if t <= nd.phase {
		return 0
	}
	return uint64((t - nd.phase + d.cfg.H - 1) / d.cfg.H)
}

// lastHeartbeat finds, among the heartbeats p sent to q that landed in
// (since, tq], the one with the largest sequence number: the value of q's
// slot for p at tq. Heartbeats are periodic ticks at phase + k h (while p
// lives) plus one at each retargeting; each takes hbDelay.
func (d *Detector) lastHeartbeat(p, q uint32, since, tq int64) (seq uint64, arr, sent int64, ok bool) {
	pn := &d.nodes[p]
	h := d.cfg.H
	limit := min(tq, pn.death-1) // sent at s < death
	// Largest tick index k with phase + k h <= limit.
	k := int64(-1)
	if limit >= pn.phase {
		k = (limit - pn.phase) / h
	}
	// Largest change index i >= 1 with at <= limit.
	i := len(pn.changes) - 1
	for i >= 1 && pn.changes[i].at > limit {
		i--
	}
	for k >= 0 || i >= 1 {
		var s int64
		var target uint32
		var sq uint64
		if k >= 0 && (i < 1 || pn.phase+k*h >= pn.changes[i].at) {
			// A tick at the time of a retargeting comes after it.
			s = pn.phase + k*h
			j := len(pn.changes) - 1
			for pn.changes[j].at > s {
				j--
			}
			target = pn.changes[j].obs
			sq = uint64(k+1) + uint64(j) // j retargetings at or before s
			k--
		} else {
			ch := pn.changes[i]
			s, target, sq = ch.at, ch.obs, ch.seq
			i--
		}
		if s+d.cfg.HeartbeatDelay <= since {
			break // it and every earlier one landed by since
		}
		if target != q || target == p {
			continue
		}
		a := s + d.hbDelay(p, sq)
		if a <= tq && a > since {
			return sq, a, s, true
		}
	}
	return 0, 0, 0, false
}
