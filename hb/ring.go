package hb

import (
	"errors"
	"fmt"
	"slices"

	"github.com/vigil-hpc/vigil/ranks"
)

// RingConfig parameterises one rank's ring core. Times are nanoseconds.
type RingConfig struct {
	// Self is this rank, N the initial number of ranks.
	Self ranks.Rank
	N    int
	// Delta is δ, the suspicion time-out (SUSP-TIMEOUT).
	Delta int64
	// Probe, when > 0, turns on block mending (mend.go): an observer that
	// finds its emitter dead probes the next Probe predecessors at once
	// (doubling each round) instead of waiting 2δ for each in turn, so a
	// dead block of consecutive ranks (a host) is known in about 2δ.
	// 0 is Algorithm 1's one-at-a-time mending.
	Probe int
	// ProbeTimeout is how long a probed rank has to answer (default δ).
	ProbeTimeout int64
	// ProbeAfter, with Probe, probes the emitter's predecessors early: once
	// the emitter has been silent for ProbeAfter (< Delta), before it is
	// suspected, so that a dead block is known about ProbeAfter +
	// ProbeTimeout after the crash rather than Delta + ProbeTimeout. 0
	// probes at the suspicion.
	ProbeAfter int64
	// Hosts, with Probe, labels the host of every rank (Hosts[r] for rank
	// r; len N): a probe round also probes every further predecessor that
	// shares the host of its first candidate and lies contiguously before
	// it, so a dead host of any size is resolved in one round (mend.go).
	// nil: no labels. The slice is only read; Rings may share one.
	Hosts []uint32
}

// Validate reports the first bad field.
func (c RingConfig) Validate() error {
	switch {
	case c.N < 1:
		return fmt.Errorf("hb: RingConfig.N = %d, want ≥ 1", c.N)
	case int64(c.Self) >= int64(c.N):
		return fmt.Errorf("hb: RingConfig.Self = %d, want < N = %d", c.Self, c.N)
	case c.Delta <= 0:
		return fmt.Errorf("hb: RingConfig.Delta = %d, want > 0", c.Delta)
	case c.Probe < 0:
		return fmt.Errorf("hb: RingConfig.Probe = %d, want ≥ 0", c.Probe)
	case c.ProbeTimeout < 0:
		return fmt.Errorf("hb: RingConfig.ProbeTimeout = %d, want ≥ 0", c.ProbeTimeout)
	case c.ProbeAfter < 0 || c.ProbeAfter >= c.Delta && c.ProbeAfter > 0:
		return fmt.Errorf("hb: RingConfig.ProbeAfter = %d, want 0 or below Delta = %d", c.ProbeAfter, c.Delta)
	case c.Hosts != nil && len(c.Hosts) != c.N:
		return fmt.Errorf("hb: RingConfig.Hosts has %d labels, want N = %d", len(c.Hosts), c.N)
	}
	return nil
}

// Detection is what task T3 (or a clean departure) asks the node to
// broadcast: BCASTMSG(dead, i, D_i).
type Detection struct {
	// Dead is the rank found dead (or that left).
	Dead ranks.Rank
	// More are further ranks to broadcast with Dead (block mending): the
	// rest of a dead block that did not answer a probe, in ring order, then
	// the ranks the same mending reported before.
	More []ranks.Rank
	// Left is true when Dead departed cleanly (it told us), false for a crash.
	Left bool
	// D is a copy of D_i after Dead was added: the participant set of the
	// broadcast is its complement.
	D ranks.Set
	// At is when the ring core decided, as passed in now.
	At int64
	// Frozen counts the ranks found dead whose life words the prober read
	// and saw standing still through the round: their heartbeat threads
	// stopped too (life.go); LifeRead how many of the ranks the round
	// probed had life words it read. For T3, both are 1 when the
	// emitter's life word was read.
	Frozen, LifeRead int
	// Ran is, for T3, the latest time the emitter's life word showed its
	// heartbeat thread ran, and Read when it was last read (0: never read
	// since it became the emitter).
	Ran, Read int64
}

// Output is what one input asks the driver to do. At most one of each.
type Output struct {
	// Detected is set when this rank found its emitter dead (T3) or was
	// told by its departing emitter that it left.
	Detected *Detection
	// NewObserverTo, when SendNewObserver is set, is the new emitter to
	// which the driver must send NEWOBSERVER(self) (T3, line 23).
	NewObserverTo   ranks.Rank
	SendNewObserver bool
	// ObserverChanged says the emitter thread must retarget its heartbeats
	// to Observer() and send one at once (T4: HB-TIMEOUT ← 0).
	ObserverChanged bool
	// Probe lists the ranks the driver must send PROBE(ProbeRound) to
	// (block mending).
	Probe      []ranks.Rank
	ProbeRound uint64
	// ForwardLeave, when set, is a LEAVE this departing rank received from
	// its emitter: the driver sends it on, unchanged, to ForwardTo (this
	// rank's observer), so that ranks departing together are all announced
	// as departures (see Departed).
	ForwardLeave *Departure
	ForwardTo    ranks.Rank
}

// Departure is LEAVE(Rank, Emitter): Rank departs and hands its emitter on.
type Departure struct {
	Rank, Emitter ranks.Rank
}

// ErrUnknownRank is returned for a rank outside [0, N).
var ErrUnknownRank = errors.New("hb: unknown rank")

// Ring is one rank's observation-ring state (Algorithm 1 of seed 000).
// It is not safe for concurrent use; one event loop drives it.
type Ring struct {
	cfg      RingConfig
	emitter  ranks.Rank // emitter_i: the rank we observe
	observer ranks.Rank // observer_i: the rank we heartbeat
	D        ranks.Set  // D_i: ranks known dead or departed

	deadline int64  // SUSP-TIMEOUT expiry, absolute
	lastSeq  uint64 // last heartbeat sequence seen from emitter
	started  bool
	left     bool

	mend mendState // block mending (mend.go)
	// health is the local-health score (health.go); emitterHeard is when
	// the emitter last sent a message (Heard), 0 for never since it became
	// the emitter.
	health       health
	emitterHeard int64
	// emitterRan is the latest time the emitter's life word showed its
	// heartbeat thread ran (life.go), 0 for none since it became the
	// emitter.
	emitterRan int64
	// emitterRead is when its life word was last read (0: not since it
	// became the emitter); emitterRunnable when its process was last seen
	// runnable on this host (Runnable).
	emitterRead, emitterRunnable int64
	stats                        RingStats
	// probedEarly: this silence of the emitter was probed early
	// (RingConfig.ProbeAfter); cleared by a heartbeat or a new emitter.
	probedEarly bool
	// lifeWarm is the view whose would-be candidates WantLife last
	// returned, lifeRetry when to return them again (0: not before the
	// view changes) (life.go).
	lifeWarm  lifeKey
	lifeRetry int64
	lifeBuf   []ranks.Rank // WantLife's answer, reused
}

// NewRing returns the initial state of task Initialization:
// emitter_i = i−1 mod N, observer_i = i+1 mod N, D_i = ∅.
func NewRing(cfg RingConfig) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := ranks.Rank(cfg.N)
	return &Ring{
		cfg:      cfg,
		emitter:  (cfg.Self + n - 1) % n,
		observer: (cfg.Self + 1) % n,
	}, nil
}

// Start arms SUSP-TIMEOUT at now+grace: the first heartbeat of the initial
// emitter must arrive by then. grace ≥ δ lets a job's ranks come up.
func (r *Ring) Start(now, grace int64) {
	if grace < r.cfg.Delta {
		grace = r.cfg.Delta
	}
	r.started = true
	r.deadline = now + grace
}

// Self returns this rank.
func (r *Ring) Self() ranks.Rank { return r.cfg.Self }

// Emitter returns emitter_i, the rank this one observes. It equals Self when
// every other rank is dead.
func (r *Ring) Emitter() ranks.Rank { return r.emitter }

// Observer returns observer_i, the rank this one heartbeats.
func (r *Ring) Observer() ranks.Rank { return r.observer }

// Dead returns D_i. Callers must not modify it.
func (r *Ring) Dead() *ranks.Set { return &r.D }

// Deadline returns the next time the ring has something to decide:
// SUSP-TIMEOUT's expiry, an open probe round's end, or when an early probe
// is due (RingConfig.ProbeAfter).
func (r *Ring) Deadline() int64 {
	d := r.SuspectDeadline()
	if r.earlyPending() {
		d = min(d, r.earlyAt())
	}
	return d
}

// SuspectDeadline is Deadline without the early probes: for a driver whose
// checks tell it when the emitter's silence reaches ProbeAfter (so that a
// quiet job costs no wake-up at ProbeAfter).
func (r *Ring) SuspectDeadline() int64 {
	if r.mend.active && !r.mend.early && r.mend.deadline < r.deadline {
		return r.mend.deadline
	}
	return r.deadline
}

// Alone reports whether every other rank is known dead.
func (r *Ring) Alone() bool { return r.emitter == r.cfg.Self }

// WatchRecord is what the observer's checks on the heartbeat thread
// (heartbeat.Watch) saw of one emitter: the input of Observe.
type WatchRecord struct {
	// Emitter is the rank under watch.
	Emitter ranks.Rank
	// Seq is the largest value of its slot word seen by a check since
	// heartbeat.Watch.Set.
	Seq uint64
	// GrewAt is when a check first saw Seq, or re-armed after a stall:
	// SUSP-TIMEOUT runs from then.
	GrewAt int64
	// CheckedAt is when the last check ran.
	CheckedAt int64
}

// Observe is the observer's check when the heartbeat thread runs the
// checks (heartbeat.Watch): rec is what they saw of the emitter. A grown
// word is T2 at the time a check first saw it (SUSP-TIMEOUT ← δ from then);
// a re-arm after a stalled check moves the deadline later, never earlier.
// T3 fires only when a check ran at or after the deadline and the word had
// not grown by then: a stalled heartbeat thread delays a detection and
// never causes one. A record about another emitter (the ring moved on
// since) is ignored; now times the reconnection.
func (r *Ring) Observe(now int64, rec WatchRecord) Output {
	if !r.started || r.left || r.Alone() || rec.Emitter != r.emitter {
		return Output{}
	}
	if rec.Seq > r.lastSeq { // task T2
		r.lastSeq = rec.Seq
		r.deadline = rec.GrewAt + r.cfg.Delta
		r.heard()
	} else if d := rec.GrewAt + r.cfg.Delta; d > r.deadline {
		r.deadline = d
	}
	var early Output
	if r.earlyDue(now) { // block mending: probe before suspecting (mend.go); a probe reports no one by itself
		early = r.probeEarly(now)
	}
	return withEarly(early, r.observeExpired(now, rec))
}

// observeExpired is Observe once the record was taken into account.
func (r *Ring) observeExpired(now int64, rec WatchRecord) Output {
	r.dropExpiredEarly(now)
	if r.mend.active && !r.mend.early { // block mending: the probe round decides (mend.go)
		// On its deadline, with no check after it needed: a live c1 answers
		// the PROBE, which it handles no later than the NEWOBSERVER that
		// would start its heartbeats to us.
		if out, ok := r.decideRound(now); !ok {
			return out
		}
		return r.resolve(now)
	}
	if rec.CheckedAt < r.deadline {
		return Output{}
	}
	if out, ok := r.refute(now); ok {
		return out
	}
	// task T3
	dead := r.emitter
	r.D.Add(dead)
	det := &Detection{Dead: dead, D: r.D.Clone(), At: now}
	if r.emitterRan != 0 { // its life word was read, and showed no period for δ
		det.LifeRead, det.Frozen, det.Ran, det.Read = 1, 1, r.emitterRan, r.emitterRead
	}
	return r.crashed(now, det)
}

// reconnect is lines 19 and 22–23 of T3: SUSP-TIMEOUT ← 2δ,
// emitter_i ← FindEmitter(D_i), NEWOBSERVER(i) to it.
func (r *Ring) reconnect(now int64, det *Detection) Output {
	out := Output{Detected: det}
	r.emitter = r.findEmitter()
	r.lastSeq = 0 // slots are per emitter: the new emitter's word starts at 0
	r.emitterHeard, r.emitterRan, r.emitterRead, r.emitterRunnable = 0, 0, 0, 0
	r.probedEarly = false
	r.deadline = now + 2*r.cfg.Delta
	if !r.Alone() {
		out.NewObserverTo, out.SendNewObserver = r.emitter, true
	}
	if r.D.Has(r.observer) {
		// Our observer is dead too: whoever observes us next will say so
		// with NEWOBSERVER; stop heartbeating a dead rank meanwhile.
		r.observer = r.nextAlive()
		out.ObserverChanged = true
	}
	return out
}

// findEmitter is FindEmitter(D_i): the first rank preceding emitter_i on the
// ring that is not in D_i (Self if there is none).
func (r *Ring) findEmitter() ranks.Rank {
	n := ranks.Rank(r.cfg.N)
	k := r.emitter
	for r.D.Has(k) {
		k = (k + n - 1) % n
	}
	return k
}

// nextAlive returns the first rank after Self not in D_i (Self if none).
func (r *Ring) nextAlive() ranks.Rank {
	n := ranks.Rank(r.cfg.N)
	k := (r.cfg.Self + 1) % n
	for k != r.cfg.Self && r.D.Has(k) {
		k = (k + 1) % n
	}
	return k
}

// NewObserver is task T4: rank j announced it observes us now.
// observer_i ← j; HB-TIMEOUT ← 0. A NEWOBSERVER from a rank known dead
// (a stale message from a departed rank) is ignored.
func (r *Ring) NewObserver(now int64, j ranks.Rank) (Output, error) {
	if int64(j) >= int64(r.cfg.N) || j == r.cfg.Self {
		return Output{}, fmt.Errorf("%w: NEWOBSERVER from %d (N = %d, self %d)", ErrUnknownRank, j, r.cfg.N, r.cfg.Self)
	}
	if r.left || r.D.Has(j) {
		return Output{}, nil
	}
	r.observer = j
	return Output{ObserverChanged: true}, nil
}

// Learn is task T5's D_i ← D_i ∪ {dead}, for ranks learned at now from
// a broadcast (crashed or departed). It returns the ranks that were new and
// whether observer_i changed (our observer was among them: the emitter
// thread then heartbeats our next alive successor, which is the rank that
// will send us NEWOBSERVER). Reconnection of our own emitter still waits for
// SUSP-TIMEOUT, as in Algorithm 1.
func (r *Ring) Learn(now int64, dead []ranks.Rank) (fresh []ranks.Rank, observerChanged bool) {
	notOther := func(d ranks.Rank) bool { return int64(d) >= int64(r.cfg.N) || d == r.cfg.Self }
	known := dead
	if slices.ContainsFunc(dead, notOther) {
		known = slices.DeleteFunc(slices.Clone(dead), notOther)
	}
	fresh = r.D.AddRanks(known) // one merge for a broadcast of many deaths
	if r.D.Has(r.observer) && !r.left {
		r.observer = r.nextAlive()
		observerChanged = true
	}
	return fresh, observerChanged
}

// Leave is a clean departure: this rank stops observing and asks the
// driver to tell its observer (LEAVE(self, emitter_i)) so the departure is
// not reported as a crash. It returns the observer to notify and the emitter
// to hand over.
func (r *Ring) Leave() (observer, emitter ranks.Rank) {
	r.left = true
	return r.observer, r.emitter
}

// Left reports whether this rank has departed (Leave). A departed rank
// that is still running answers PROBE and NEWOBSERVER with LEAVE(self,
// Emitter()), so that nobody mistakes its silence for a crash.
func (r *Ring) Left() bool { return r.left }

// Departed handles LEAVE(j, emitter_j) from our emitter j: the observer adds
// j to D_i, adopts j's emitter (skipping ranks known dead) and announces the
// departure. A LEAVE from a rank that is not our emitter only adds it to D_i
// and is announced too, so nobody waits on it.
//
// A rank that departed itself (a whole job stopping at once: its observer
// and its emitter leave together) does not announce: it forwards the LEAVE
// of its emitter to its own observer, which has adopted j as its emitter
// from this rank's LEAVE, sent earlier on the same path. The chain of
// departing ranks thus hands each departure on to the first rank that
// stays, which announces it as a departure instead of finding a silent
// emitter and reporting a crash.
func (r *Ring) Departed(now int64, j, hisEmitter ranks.Rank) (Output, error) {
	if int64(j) >= int64(r.cfg.N) || int64(hisEmitter) >= int64(r.cfg.N) || j == r.cfg.Self {
		return Output{}, fmt.Errorf("%w: LEAVE(%d, %d) (N = %d, self %d)", ErrUnknownRank, j, hisEmitter, r.cfg.N, r.cfg.Self)
	}
	if r.left {
		return r.forwardLeave(j, hisEmitter), nil
	}
	if !r.D.Add(j) {
		return Output{}, nil
	}
	det := &Detection{Dead: j, Left: true, D: r.D.Clone(), At: now}
	if j != r.emitter {
		return Output{Detected: det}, nil
	}
	r.mend.active = false // the departing emitter named its successor
	if !r.D.Has(hisEmitter) && hisEmitter != r.cfg.Self {
		r.emitter = hisEmitter
	}
	return r.reconnect(now, det), nil
}

// forwardLeave is Departed for a rank that has departed: LEAVE(j,
// hisEmitter) from its emitter goes on to its observer, and hisEmitter
// becomes the emitter whose LEAVE comes next along the chain.
func (r *Ring) forwardLeave(j, hisEmitter ranks.Rank) Output {
	if j != r.emitter || r.observer == j || r.observer == r.cfg.Self {
		return Output{}
	}
	if hisEmitter != r.cfg.Self {
		r.emitter = hisEmitter
	}
	return Output{ForwardLeave: &Departure{Rank: j, Emitter: hisEmitter}, ForwardTo: r.observer}
}
