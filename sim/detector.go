package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/hb"
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
// ranks, each with an hb.Ring (seed 000 Algorithm 1) and a
// bcast.Broadcaster, exchanging NEWOBSERVER and broadcast messages over Net.
// Times are nanoseconds.
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
	// Start is the time of the failure phase, after the ring reached its
	// steady state (default 2h + Check + the heartbeat delay bound).
	Start int64
	// Horizon bounds the simulated time after Start (default 1000 δ).
	Horizon int64
	// Exhaustive hands every copy of a broadcast to the receiving
	// Broadcaster; by default a copy reaching a rank that already
	// delivered that broadcast only occupies the ports (the core would
	// drop it as a duplicate).
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
	case d.Start < d.H+d.HeartbeatDelay+d.Check:
		return fmt.Errorf("sim: DetectorConfig.Start = %d, want ≥ h + heartbeat delay + check period", d.Start)
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
	// TraceDetect: Node's ring found its emitter Rank dead (task T3) and
	// starts a broadcast.
	TraceDetect
	// TraceLearn: Node learned from the broadcast started by Source that
	// Rank is dead (task T5).
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
	// Stabilized is the time until the first stable configuration after
	// every planned failure (every alive rank observes its closest alive
	// predecessor, is observed by its closest alive successor and knows
	// exactly the dead ranks), -1 if not reached within the horizon.
	Stabilized int64
	// LastFailure is the time of the last failure.
	LastFailure int64
	// Detections counts T3 detections (each starts a broadcast).
	Detections int
	// BcastMsgs, NewObserverMsgs and Heartbeats count messages sent
	// (heartbeats only in HeartbeatsFull). BcastForwarded counts the
	// broadcast messages sent by ranks other than the broadcast's source.
	BcastMsgs, BcastForwarded, NewObserverMsgs, Heartbeats uint64
	// FalseSuspicions counts live ranks added to some D_i.
	FalseSuspicions int
	// Events is the number of events processed.
	Events uint64
	// Dead lists the crashed ranks in increasing order.
	Dead []ranks.Rank
}

// Event kinds of the detector, in their order at equal times.
const (
	evFail     uint8 = iota // Node crashes (A = 1: draw an alive victim)
	evNewObs                // NEWOBSERVER delivered to Node from A
	evBcast                 // broadcast A delivered to Node from B
	evHbArrive              // heartbeat B from A lands at Node (full)
	evCheck                 // Node's deadline (A = 0, B = stamp) or periodic check (A = 1)
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
	ring  *hb.Ring
	bc    *bcast.Broadcaster
	alive bool
	death int64

	// Emitter side.
	phase   int64       // periodic heartbeats at phase + k h
	hbSeq   uint64      // full: last sequence number sent
	changes []obsChange // observer history, changes[0] is the initial one

	// Observer side.
	cphase   int64  // checks at cphase + k c
	since    int64  // when the current emitter became current
	slot     uint64 // largest sequence number seen from the current emitter
	lastSent int64  // skip: send time of the heartbeat that set slot
	stamp    uint64 // validity stamp of the pending evCheck with A = 0
	dormant  bool   // skip: no evaluation pending, the emitter is heartbeating us

	ok        bool // reconnected (seed 000 §3.1.3)
	knownDead int  // |D_i ∩ dead|
}

type bcastRec struct {
	msg bcast.Message
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

	frng  *rand.Rand // failures
	fixed []Failure
	mtbf  int64
	nFail int // fixed failures injected

	bcasts []bcastRec

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
	d := &Detector{cfg: c, seed: seed, first: -1}
	n := c.N
	d.ports = c.Net.NewPorts(n, newRand(seed, streamNet))
	d.frng = newRand(seed, streamFailures)
	d.fixed, d.mtbf = c.Failures.plan(n, d.frng)
	prng := newRand(seed, streamPhases)
	d.nodes = make([]dnode, n)
	d.death = make([]int64, n)
	d.alive = n
	for i := range d.nodes {
		r, err := hb.NewRing(hb.RingConfig{Self: ranks.Rank(i), N: n, Delta: c.Delta})
		if err != nil {
			return nil, err
		}
		r.Start(0, c.Delta)
		nd := &d.nodes[i]
		nd.ring = r
		nd.bc = bcast.NewBroadcaster(ranks.Rank(i), n, c.Overlay)
		nd.alive = true
		nd.death = 1<<62 - 1
		d.death[i] = nd.death
		nd.phase = prng.Int64N(c.H)
		if c.Check > 0 {
			nd.cphase = prng.Int64N(c.Check)
		}
		nd.changes = []obsChange{{at: 0, obs: uint32(r.Observer())}}
		nd.lastSent = -1
		nd.ok = true
	}
	d.okCount = n
	for i := range d.nodes {
		nd := &d.nodes[i]
		switch {
		case c.Heartbeats == HeartbeatsSkip:
			// Every emitter heartbeats its observer from the start:
			// nothing to evaluate until something changes.
			nd.dormant = true
		default:
			d.en.Schedule(Event{At: nd.phase, Kind: evHbTick, Node: uint32(i)})
			if c.Check > 0 {
				d.en.Schedule(Event{At: nd.cphase, Kind: evCheck, Node: uint32(i), A: 1})
			} else {
				d.setTimer(uint32(i))
			}
		}
	}
	for _, f := range d.fixed {
		if int64(f.Rank) >= int64(n) {
			return nil, fmt.Errorf("sim: failure of rank %d, want < N = %d", f.Rank, n)
		}
		d.en.Schedule(Event{At: c.Start + f.At, Kind: evFail, Node: uint32(f.Rank)})
	}
	return d, nil
}

// Run simulates until the first stable configuration after the planned
// failures, or the horizon, and returns the result.
func (d *Detector) Run() DetectorResult {
	if d.done {
		return d.res
	}
	d.res.FirstKnown, d.res.Stabilized = -1, -1
	end := d.cfg.Start + d.cfg.Horizon
	for {
		e, ok := d.en.Next(end)
		if !ok {
			break
		}
		d.handle(e)
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

// Ring returns rank r's ring core and whether r is alive, for inspection
// after Run.
func (d *Detector) Ring(r ranks.Rank) (*hb.Ring, bool) {
	return d.nodes[r].ring, d.nodes[r].alive
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
		d.kill(e.Node, now)
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
	case evHbArrive:
		d.onHeartbeat(e.Node, e.A, e.B, now)
	case evCheck:
		nd := &d.nodes[e.Node]
		if !nd.alive {
			return
		}
		if e.A == 1 { // periodic check (full mode)
			d.apply(e.Node, nd.ring.Check(now, nd.slot), now)
			d.en.Schedule(Event{At: now + d.cfg.Check, Kind: evCheck, Node: e.Node, A: 1})
			return
		}
		if e.B != nd.stamp {
			return // superseded
		}
		if d.skip() {
			d.eval(e.Node, now)
			return
		}
		// Full mode, timer: SUSP-TIMEOUT expired (or moved).
		if now < nd.ring.Deadline() {
			d.setTimer(e.Node)
			return
		}
		d.apply(e.Node, nd.ring.Check(now, nd.slot), now)
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
	if d.first >= 0 && nd.ring.Dead().Has(ranks.Rank(d.first)) {
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
			if o.alive && o.ring.Dead().Has(ranks.Rank(x)) {
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
		if q := &d.nodes[su]; q.ring.Emitter() == ranks.Rank(x) {
			d.wake(su, now)
		}
	}
}

// --- stability accounting ---------------------------------------------

func (d *Detector) stable() bool {
	return d.deadCount > 0 && d.nFail == len(d.fixed) &&
		d.alive*d.deadCount == d.knowSum && d.falseCount == 0 && d.okCount == d.alive
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

func (d *Detector) predAlive(p uint32) uint32 {
	n := uint32(len(d.nodes))
	k := (p + n - 1) % n
	for k != p && !d.nodes[k].alive {
		k = (k + n - 1) % n
	}
	return k
}

func (d *Detector) succAlive(p uint32) uint32 {
	n := uint32(len(d.nodes))
	k := (p + 1) % n
	for k != p && !d.nodes[k].alive {
		k = (k + 1) % n
	}
	return k
}

func (d *Detector) recomputeOK(p uint32) {
	nd := &d.nodes[p]
	if !nd.alive {
		return
	}
	ok := nd.ring.Emitter() == d.predAlive(p) && nd.ring.Observer() == d.succAlive(p)
	if ok != nd.ok {
		nd.ok = ok
		if ok {
			d.okCount++
		} else {
			d.okCount--
		}
	}
}

// --- ring outputs -------------------------------------------------------

// apply carries out what rank q's ring asked for, in the node runtime's
// order: retarget the heartbeats, send NEWOBSERVER, start the broadcast.
func (d *Detector) apply(q uint32, out hb.Output, now int64) {
	if out.ObserverChanged {
		d.retarget(q, now)
	}
	if out.SendNewObserver {
		to := uint32(out.NewObserverTo)
		alive := d.nodes[to].alive
		sent, at := d.ports.Transfer(now, q, to, alive)
		d.res.NewObserverMsgs++
		if alive {
			d.en.Schedule(Event{At: at, Kind: evNewObs, Node: to, A: q, B: msgTag(q, sent, at)})
		}
	}
	if det := out.Detected; det != nil {
		nd := &d.nodes[q]
		d.res.Detections++
		d.trace(TraceEvent{At: now, Kind: TraceDetect, Node: ranks.Rank(q), Rank: det.Dead})
		d.learned(q, det.Dead, now)
		// The emitter changed: heartbeats from the new one count from now.
		nd.since, nd.slot, nd.lastSent = now, 0, -1
		if !d.skip() && d.cfg.Check == 0 {
			d.setTimer(q)
		}
		d.startBroadcast(q, det, now)
	}
	d.recomputeOK(q)
}

func (d *Detector) onNewObserver(to, from uint32, now int64) {
	nd := &d.nodes[to]
	if !nd.alive {
		return
	}
	d.trace(TraceEvent{At: now, Kind: TraceNewObserver, Node: ranks.Rank(to), Source: ranks.Rank(from)})
	out, err := nd.ring.NewObserver(now, ranks.Rank(from))
	if err != nil {
		panic(err)
	}
	d.apply(to, out, now)
}

// retarget is the emitter thread's reaction to ObserverChanged: heartbeat
// the new observer at once (T4, HB-TIMEOUT ← 0).
func (d *Detector) retarget(p uint32, now int64) {
	nd := &d.nodes[p]
	old := nd.changes[len(nd.changes)-1].obs
	obs := uint32(nd.ring.Observer())
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
	if old != obs && old != p && d.nodes[old].alive && d.nodes[old].ring.Emitter() == ranks.Rank(p) {
		d.wake(old, now)
	}
}

// --- broadcasts ---------------------------------------------------------

func (d *Detector) startBroadcast(q uint32, det *hb.Detection, now int64) {
	nd := &d.nodes[q]
	msg, to := nd.bc.Start(bcast.Failed, []ranks.Rank{det.Dead}, det.D, now)
	idx := uint32(len(d.bcasts))
	d.bcasts = append(d.bcasts, bcastRec{msg: msg, got: make([]uint64, (len(d.nodes)+63)/64)})
	d.bcasts[idx].got[q/64] |= 1 << (q % 64)
	d.sendBcast(q, idx, to, now)
}

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
	nd := &d.nodes[q]
	first, fwd, err := nd.bc.Receive(rec.msg, nd.ring.Dead())
	if err != nil {
		panic(err)
	}
	if !first {
		if !already {
			panic(fmt.Sprintf("sim: rank %d's broadcaster dropped broadcast %v it never delivered", q, rec.msg.ID))
		}
		return
	}
	if already {
		panic(fmt.Sprintf("sim: rank %d delivered broadcast %v twice", q, rec.msg.ID))
	}
	rec.got[q/64] |= 1 << (q % 64)
	fresh, oc := nd.ring.Learn(rec.msg.Dead) // task T5
	for _, f := range fresh {
		d.learned(q, f, now)
		d.trace(TraceEvent{At: now, Kind: TraceLearn, Node: ranks.Rank(q), Rank: f, Source: rec.msg.ID.Source})
	}
	if oc {
		d.retarget(q, now)
	}
	d.res.BcastForwarded += uint64(len(fwd))
	d.sendBcast(q, idx, fwd, now)
	d.recomputeOK(q)
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
	if obs := uint32(nd.ring.Observer()); obs != p {
		d.sendHeartbeat(p, obs, nd.hbSeq, now)
	}
	d.en.Schedule(Event{At: now + d.cfg.H, Kind: evHbTick, Node: p})
}

func (d *Detector) sendHeartbeat(p, q uint32, seq uint64, now int64) {
	d.res.Heartbeats++
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

// onHeartbeat is task T2: only heartbeats of the current emitter count.
func (d *Detector) onHeartbeat(q, p uint32, seq uint64, now int64) {
	nd := &d.nodes[q]
	if !nd.alive || nd.ring.Emitter() != ranks.Rank(p) || seq <= nd.slot {
		return
	}
	nd.slot = seq
	if d.cfg.Check == 0 {
		d.apply(q, nd.ring.Check(now, seq), now)
		d.setTimer(q)
	}
}

// setTimer arms the SUSP-TIMEOUT timer at the ring's deadline.
func (d *Detector) setTimer(q uint32) {
	nd := &d.nodes[q]
	nd.stamp++
	d.en.Schedule(Event{At: max(nd.ring.Deadline(), d.en.Now), Kind: evCheck, Node: q, B: nd.stamp})
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

// wake schedules an evaluation of dormant or waiting observer q now.
func (d *Detector) wake(q uint32, now int64) {
	nd := &d.nodes[q]
	nd.dormant = false
	nd.stamp++
	d.en.Schedule(Event{At: now, Kind: evCheck, Node: q, B: nd.stamp})
}

func (d *Detector) tickFloor(nd *dnode, t int64) int64 {
	c := d.cfg.Check
	if t < nd.cphase {
		return nd.cphase - c
	}
	return nd.cphase + (t-nd.cphase)/c*c
}

func (d *Detector) tickCeil(nd *dnode, t int64) int64 {
	c := d.cfg.Check
	if t <= nd.cphase {
		return nd.cphase
	}
	return nd.cphase + (t-nd.cphase+c-1)/c*c
}

// eval is the skipping mode's observer: it replays in closed form what the
// heartbeats since the last evaluation did (task T2), expires SUSP-TIMEOUT
// if due (task T3), and decides when to look again.
func (d *Detector) eval(q uint32, x int64) {
	nd := &d.nodes[q]
	r := nd.ring
	c := d.cfg.Check
	tq, onTick := x, true
	if c > 0 {
		tq = d.tickFloor(nd, x)
		onTick = tq == x
	}
	if p := uint32(r.Emitter()); p != q {
		if seq, arr, sent, ok := d.lastHeartbeat(p, q, nd.since, tq); ok && seq > nd.slot {
			nd.slot, nd.lastSent = seq, sent
			seen := arr
			if c > 0 {
				seen = d.tickCeil(nd, arr)
			}
			d.apply(q, r.Check(seen, seq), x)
		}
	}
	if onTick && !r.Alone() && x >= r.Deadline() {
		d.apply(q, r.Check(x, nd.slot), x)
	}
	// Next evaluation.
	if !nd.alive || r.Alone() {
		return
	}
	p := uint32(r.Emitter())
	pn := &d.nodes[p]
	if pn.alive && uint32(pn.ring.Observer()) == q && nd.lastSent >= pn.changes[len(pn.changes)-1].at {
		// p heartbeats us every h from before our last sighting: no
		// deadline can expire until p dies or turns away, which wakes us.
		nd.dormant = true
		nd.stamp++
		return
	}
	at := r.Deadline()
	if c > 0 {
		at = d.tickCeil(nd, at)
	}
	nd.stamp++
	d.en.Schedule(Event{At: max(at, x), Kind: evCheck, Node: q, B: nd.stamp})
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
