package hb

import (
	"slices"

	"github.com/vigil-hpc/vigil/ranks"
)

// Block mending, an extension to Algorithm 1 (RingConfig.Probe > 0).
//
// Ranks are placed in blocks (one host holds ranks r … r+k−1), and a host
// crash kills a block of consecutive ranks at once. Algorithm 1 walks such
// a block one emitter at a time: the observer finds its emitter e dead
// after δ, sends NEWOBSERVER to e−1, waits 2δ for it, finds it dead, and
// so on — b dead ranks take about 2bδ to be known.
//
// With block mending, the observer that finds e dead (T3) sends
// NEWOBSERVER to c1 = FindEmitter(D_i) as before, and PROBE(round) to c1 …
// cW, the W first predecessors not in D_i. A live rank answers ALIVE(round)
// at once. When ProbeTimeout (δ) has passed:
//
//   - c1 answered or its heartbeat arrived: nothing more; it is the
//     emitter, as in Algorithm 1;
//   - else cj, the first candidate that answered: c1 … cj−1 are dead (each
//     missed its own time-out: it did not answer within ProbeTimeout), one
//     detection carries them all (Detection.More), and NEWOBSERVER goes to
//     cj, which is known alive;
//   - else nobody answered: c1 … cW are dead, and a new round probes the
//     next 2W predecessors.
//
// A rank is thus reported only after its own time-out, under the same
// synchrony assumption as heartbeats (a live rank's message arrives within
// δ). A dead block of b ≤ W ranks is known by every survivor within
// δ + ProbeTimeout + B(n) of the crash (B the broadcast time), instead of
// about 2bδ; b > W takes ⌈log2(b/W + 1)⌉ rounds. Spread failures do not
// probe more than once each: a single failure costs W PROBE and W ALIVE
// messages.

// Controls. A non-answer is evidence of death only if the path would have
// carried an answer: under a correlated fault (many ranks killed or
// stopped at once) every rank's event loop and the message path are loaded
// together, and live candidates answer late. Each round therefore also
// probes up to two canaries, ranks expected alive (the first rank not in
// D_i beyond the candidates, and the first after Self), before its
// candidates, and a tail after them (the second rank after Self). A round
// reports its silent candidates only once some answer, a candidate's or a
// canary's, has come back in this mending, and no earlier than (3 +
// score) times as long as that first answer took, and (1 + score) times
// that after the last answer (health.go: the local health score), so that
// answers still trickling in keep it open. A round that no candidate
// answered also waits for its tail (up to TailWait round time-outs, or
// until the tail is known dead): a round of thousands of candidates takes
// longer than δ to send, and the tail's answer shows that every probe went
// out; the round's deadline then counts from that answer. The tail's
// latency beyond the first answer's, over the probes before it, is the
// cost of sending one probe: a round without a tail of its own (its
// candidates take in every rank not known dead) adds the time its probes
// take to leave at that cost to its deadline. Once a candidate
// answered, the silent ones before it, all that the round reports, were
// probed before it. Any message from a candidate counts as its answer, an
// answer to an earlier round of the same mending too (Heard). A round that
// no answer reached by its deadline is widened rather than resolved: the
// canary was silent as well, so the block may go on past it. In a quiet
// job the first answer comes back within a message latency and a dead block
// is reported at the round's deadline, as before.

// Early probes (RingConfig.ProbeAfter = a > 0). The observer need not wait
// for its emitter's suspicion to start probing: once the emitter has been
// silent for a, it probes c1 … cW, the emitter's W first predecessors not
// in D_i, in an early round. A heartbeat from the emitter ends the round
// (its answers are ignored). If the emitter is suspected (T3, at δ), the
// early round becomes the round of that mending: its candidates are
// exactly the ones T3 would probe, they have been waiting since a, and the
// round ends at a + ProbeTimeout; if c1 already answered, it ends at once.
// An early round that ends before T3 is dropped: it reports no one. Every
// rank reported is still one that missed its own ProbeTimeout, and a block
// of b ≤ W is known within max(δ, a + ProbeTimeout) + B(n) of the crash:
// 1.5δ + B(n) with a = δ/2 and ProbeTimeout = δ.
//
// When to probe early (EarlyProbeAfter). The early round reports no one,
// so a decides only the cost (W PROBE and W ALIVE each time an emitter is
// late by a) and the latency (a + ProbeTimeout). A driver whose checks
// run every c sees the silence in steps of c, up to the jitter of the
// checks: a fires at the first check at or past a, ⌈a/c⌉c after the last
// growth, and an a within that jitter of a multiple of c fires one check
// later half of the time. The first check without growth is no evidence
// (an emitter's beat and the checks at the same period and phase put two
// beats in one interval and none in the next); the second in a row is: a
// beat late by a whole period, or lost. EarlyProbeAfter fires at the
// first check at or past 0.4δ, and at least at the second: the k-th check
// without growth, k = max(2, ⌈0.4δ/c⌉), by asking for (k − ½)c of
// silence, capped at δ/2. With δ = 5×h and checks every h the probes go at
// 2×h = 0.4δ and the block is known by 1.4δ + B(n), where a = δ/2 fell at
// the third check, 0.6δ, and 1.6δ.

// Host labels (RingConfig.Hosts). A round of window W probes its W first
// candidates and then every further predecessor that shares the host of
// its first candidate c1 and lies contiguously before it (ranks in D_i are
// skipped, not probed, and do not break the host's run): the rest of c1's
// host. When a host dies, its last rank e is the emitter of the next live
// rank's observer, c1 is e−1 (or, if e is the first rank of its host, the
// last of the host before), and the first round probes the whole dead
// host whatever its size: it is resolved in one round, δ + ProbeTimeout
// after the crash (a + ProbeTimeout with early probes). Every round ends
// at the end of its c1's host or beyond, so a block touching j hosts takes
// at most j rounds, and never more than without labels (HostBlockBound).
// A spread failure probes max(W, the rest of c1's host) ranks instead of
// W. Ranks of one host that are not contiguous on the ring (a cyclic
// placement) add nothing, as if unlabelled.

// mendState is one probe round.
type mendState struct {
	active   bool
	early    bool         // started before the emitter's suspicion (ProbeAfter)
	round    uint64       // the round's number, repeated by ALIVE
	window   int          // W of this round
	cands    []ranks.Rank // c1 … cW, c1 being the emitter when the round began
	candSet  *ranks.Set   // the same past smallRound, for probes: every message asks it
	answered ranks.Set
	start    int64  // when the round began
	deadline int64  // when the round is resolved
	first    uint64 // the first round of this mending (its early round, if any)
	late     bool   // an answer came late (health.go)
	heldOpen bool   // the round was held open for a stalled prober (health.go)
	// canaries are probed beside the candidates as controls (health.go):
	// the first rank not in D_i beyond the candidates and the first after
	// Self, when they are not candidates. control is how long the first
	// answer, a candidate's or a canary's, took since the mending began (0:
	// none yet), lastAnswer when the last one came.
	canaries    []ranks.Rank
	hasBeyond   bool       // canaries[0] is the rank before the candidates
	tail        ranks.Rank // the second rank after Self, probed last (hasTail)
	hasTail     bool
	tailHeld    bool // the round is held open for its tail's answer (decideRound)
	blockWaited bool // the round was given one more time-out for a silent window (decideRound)
	// sendCost is how long one probe took to send, as the last tail's
	// answer showed (its latency over the probes sent before it): a later
	// round's deadline adds the time its own probes take to leave.
	sendCost   int64
	firstRT    int64 // how long the round's first answer took since its start
	control    int64
	lastAnswer int64
	origin     int64 // when the mending's first round began
	lastCall   bool  // the round's last call was given (decideRound)
	// life is the latest time a probed rank's life word showed its
	// thread ran, lives the probed ranks whose thread ran after the round
	// began (life.go).
	life  map[ranks.Rank]int64
	lives ranks.Set
	// reported are the ranks this mending reported so far (the emitter
	// found dead by T3 first): each later detection carries them again.
	reported []ranks.Rank
}

// EarlyProbeAfter is the ProbeAfter for an observer whose checks of its
// emitter run every check nanoseconds (see "When to probe early" in this
// file): (k − ½)·check with k = max(2, ⌈0.4·delta/check⌉), so that the
// k-th check in a row without growth starts the early round whatever the
// checks' jitter, capped at delta/2. It returns 0 (no early probes) when
// check or delta is not positive.
func EarlyProbeAfter(delta, check int64) int64 {
	if delta <= 0 || check <= 0 {
		return 0
	}
	k := max(2, (2*delta+5*check-1)/(5*check))
	return min(k*check-check/2, delta/2)
}

// probeTimeout is RingConfig.ProbeTimeout, δ by default.
func (r *Ring) probeTimeout() int64 {
	if r.cfg.ProbeTimeout > 0 {
		return r.cfg.ProbeTimeout
	}
	return r.cfg.Delta
}

// crashed is T3's reconnection after a crash, with block mending when
// configured: out gets the probes of a first round, unless an early round
// already probed the same candidates.
func (r *Ring) crashed(now int64, det *Detection) Output {
	early := r.mend
	out := r.reconnect(now, det)
	if r.cfg.Probe == 0 || r.Alone() {
		return out
	}
	if early.active && early.early && len(early.cands) > 0 && early.cands[0] == r.emitter {
		r.mend.early = false
		r.mend.reported = []ranks.Rank{det.Dead}
		if early.alive(r.emitter) {
			r.mend.active = false // c1 is alive: Algorithm 1's reconnection
		}
		return out
	}
	r.probeRound(now, r.cfg.Probe, &out)
	r.mend.reported = []ranks.Rank{det.Dead}
	r.mend.first = r.mend.round // a new mending
	if early.early && early.round != 0 && len(early.cands) > 0 && early.cands[0] == r.emitter {
		// The early round ran out before the suspicion: what it heard is
		// still evidence of life (health.go), and its late answers count.
		r.mend.answered, r.mend.life, r.mend.lives = early.answered, early.life, early.lives
		r.mend.first = early.first
		r.mend.control = early.control
		r.mend.origin = early.origin
		if r.mend.alive(r.emitter) {
			r.mend.active = false
		}
	}
	return out
}

// earlyAt is when the emitter's current silence reaches ProbeAfter.
func (r *Ring) earlyAt() int64 { return r.deadline - r.cfg.Delta + r.cfg.ProbeAfter }

// earlyPending reports whether an early probe is still to come for the
// emitter's current silence.
func (r *Ring) earlyPending() bool {
	return r.cfg.Probe > 0 && r.cfg.ProbeAfter > 0 && !r.probedEarly && !r.mend.active &&
		r.started && !r.left && !r.Alone()
}

// earlyDue reports whether an early probe is due at now.
func (r *Ring) earlyDue(now int64) bool { return r.earlyPending() && now >= r.earlyAt() }

// probeEarly starts an early round: the emitter's W first predecessors
// not in D_i.
func (r *Ring) probeEarly(now int64) Output {
	r.probedEarly = true
	cands := r.candidates((r.emitter+ranks.Rank(r.cfg.N)-1)%ranks.Rank(r.cfg.N), r.cfg.Probe)
	if len(cands) == 0 {
		return Output{}
	}
	round := r.mend.round + 1
	r.mend = mendState{active: true, early: true, round: round, first: round, window: r.cfg.Probe, cands: cands,
		start: now, origin: now, deadline: now + r.roundTimeout(now)}
	r.setCanaries(&r.mend)
	return Output{Probe: r.mend.probed(), ProbeRound: r.mend.round}
}

// dropExpiredEarly ends an early round whose time ran out before the
// emitter's suspicion: it reports no one. Its candidates and answers stay,
// for a suspicion that follows (crashed).
func (r *Ring) dropExpiredEarly(now int64) {
	if r.mend.active && r.mend.early && now >= r.mend.deadline {
		r.mend.active = false
	}
}

// withEarly adds the probes of an early round started by this call to out
// (unless out starts a round of its own).
func withEarly(early, out Output) Output {
	if early.Probe != nil && out.Probe == nil {
		out.Probe, out.ProbeRound = early.Probe, early.ProbeRound
	}
	return out
}

// probeRound starts a round probing the w first predecessors of Self not in
// D_i, beginning with the emitter.
func (r *Ring) probeRound(now int64, w int, out *Output) {
	cands := r.candidates(r.emitter, w)
	r.mend = mendState{active: true, round: r.mend.round + 1, first: r.mend.first, origin: now, window: w, cands: cands,
		start: now, reported: r.mend.reported, sendCost: r.mend.sendCost}
	r.setCanaries(&r.mend)
	r.mend.deadline = now + r.roundTimeout(now) + r.mend.sendTime()
	out.Probe, out.ProbeRound = r.mend.probed(), r.mend.round
}

// candidates returns the w first ranks not in D_i walking back from from
// (included) towards Self (excluded), then, with host labels, the further
// ones up to the first rank of another host than the first candidate's
// (RingConfig.Hosts). Walking back from the emitter's predecessor reaches
// Self before the emitter, which follows it.
func (r *Ring) candidates(from ranks.Rank, w int) []ranks.Rank {
	n := ranks.Rank(r.cfg.N)
	hosts := r.cfg.Hosts
	var cands []ranks.Rank
	for k := from; k != r.cfg.Self; k = (k + n - 1) % n {
		if hosts != nil && len(cands) > 0 && hosts[k] != hosts[cands[0]] {
			hosts = nil // the first candidate's host ends here
		}
		if len(cands) >= w && hosts == nil {
			break
		}
		if !r.D.Has(k) {
			cands = append(cands, k)
		}
	}
	return cands
}

// widen replaces the open round, which no answer reached, by one with the
// same first candidate and its candidates followed by as many again from
// its first canary on (and the rest of that canary's host), with new
// canaries beyond: the canary did not answer either, so the block may go
// on past it. Its answers, reports and origin are kept.
func (r *Ring) widen(now int64, out *Output) {
	old := r.mend
	n := ranks.Rank(r.cfg.N)
	beyond := (old.cands[len(old.cands)-1] + n - 1) % n
	cands := slices.Clip(old.cands)
	if beyond != r.cfg.Self {
		cands = append(cands, r.candidates(beyond, old.window)...)
	}
	r.mend = mendState{active: true, round: old.round + 1, first: old.first, origin: old.origin, window: 2 * old.window,
		cands: cands, answered: old.answered, life: old.life, lives: old.lives, reported: old.reported, sendCost: old.sendCost, start: now}
	r.setCanaries(&r.mend)
	r.mend.deadline = now + r.roundTimeout(now) + r.mend.sendTime()
	out.Probe, out.ProbeRound = r.mend.probed(), r.mend.round
	r.stats.RoundsWidened++
}

// canaries returns the controls of a round probing cands: the first rank
// not in D_i before the last of cands (walking back towards Self), and
// the first after Self, each unless it is Self or a candidate; beyond
// reports whether the first of them is the one before the candidates.
func (r *Ring) canaries(cands []ranks.Rank) (out []ranks.Rank, beyond bool) {
	if len(cands) == 0 {
		return nil, false
	}
	n := ranks.Rank(r.cfg.N)
	for i, k := range []ranks.Rank{(cands[len(cands)-1] + n - 1) % n, (r.cfg.Self + 1) % n} {
		step := n - 1 // walking back
		if len(out) > 0 || k == (r.cfg.Self+1)%n {
			step = 1
		}
		for k != r.cfg.Self && r.D.Has(k) {
			k = (k + step) % n
		}
		if k != r.cfg.Self && !slices.Contains(cands, k) && !slices.Contains(out, k) {
			out = append(out, k)
			beyond = beyond || i == 0
		}
	}
	return out, beyond
}

// probed returns the ranks the round probes: its canaries first (their
// answers are the controls, and a sender with a queue sends in order),
// then its candidates, then its tail (its answer shows that every probe
// before it was sent).
func (m *mendState) probed() []ranks.Rank { return m.appendProbed(nil) }

// appendProbed appends the round's probed ranks to dst (probed).
func (m *mendState) appendProbed(dst []ranks.Rank) []ranks.Rank {
	dst = append(append(dst, m.canaries...), m.cands...)
	if m.hasTail {
		dst = append(dst, m.tail)
	}
	return dst
}

// beyondAnswered reports whether the round's canary before its
// candidates (the first rank not in D_i beyond them) answered.
func (m *mendState) beyondAnswered() bool {
	return m.hasBeyond && m.answered.Has(m.canaries[0])
}

// sendTime is how long the probes of a round without a tail take to leave
// at sendCost each (a round with a tail waits for its answer instead).
func (m *mendState) sendTime() int64 {
	if m.hasTail {
		return 0
	}
	return m.sendCost * int64(m.untailed())
}

// untailed is how many probes the round sends besides its tail.
func (m *mendState) untailed() int { return len(m.canaries) + len(m.cands) }

// candidateAnswered reports whether a candidate (not a canary) answered.
func (m *mendState) candidateAnswered() bool {
	return slices.ContainsFunc(m.cands, m.answered.Has)
}

// smallRound is the most candidates a round looks through one by one
// (probes); a larger round keeps them sorted too.
const smallRound = 64

// frozen counts the ranks of dead whose life words were read in the round
// (and showed no period since it began: they were not alive).
func (m *mendState) frozen(dead []ranks.Rank) int {
	k := 0
	for _, c := range dead {
		if _, ok := m.life[c]; ok {
			k++
		}
	}
	return k
}

// probes reports whether the round probes j.
func (m *mendState) probes(j ranks.Rank) bool {
	in := m.candSet != nil && m.candSet.Has(j) || m.candSet == nil && slices.Contains(m.cands, j)
	return in || slices.Contains(m.canaries, j) || m.hasTail && j == m.tail
}

// setCanaries sets the controls of a round probing m.cands: its canaries,
// and its tail, the first rank not in D_i after the canary after Self,
// unless it is Self, a candidate or a canary.
func (r *Ring) setCanaries(m *mendState) {
	m.candSet = nil
	if len(m.cands) > smallRound {
		set := ranks.Of(m.cands...)
		m.candSet = &set
	}
	m.canaries, m.hasBeyond = r.canaries(m.cands)
	n := ranks.Rank(r.cfg.N)
	k := (r.nextAlive() + 1) % n
	for k != r.cfg.Self && r.D.Has(k) {
		k = (k + 1) % n
	}
	m.tail = k
	m.hasTail = k != r.cfg.Self && !m.probes(k)
}

// HostLabels turns the host name of every rank (indexed by rank, as a
// bootstrap gives them) into RingConfig.Hosts: equal names get equal
// labels. It returns nil when the names tell nothing: fewer than two
// distinct hosts (the labels would make every round probe the whole job),
// or an empty name.
func HostLabels(names []string) []uint32 {
	ids := make(map[string]uint32)
	labels := make([]uint32, len(names))
	for r, name := range names {
		if name == "" {
			return nil
		}
		id, ok := ids[name]
		if !ok {
			id = uint32(len(ids))
			ids[name] = id
		}
		labels[r] = id
	}
	if len(ids) < 2 {
		return nil
	}
	return labels
}

// Round returns the number of probe rounds this ring started.
func (r *Ring) Round() uint64 { return r.mend.round }

// Probing reports whether a probe round is open.
func (r *Ring) Probing() bool { return r.mend.active }

// Alive takes ALIVE(round) from rank j: j answered a probe of this
// mending (this round or an earlier one of the same mending, such as its
// early round). An answer of an older mending, or from a rank not probed,
// is ignored. A driver that calls Heard for every message needs Alive only
// to be explicit: Heard already counts the answer.
func (r *Ring) Alive(j ranks.Rank, round uint64) {
	m := &r.mend
	if !m.active || round < m.first || round > m.round || !m.probes(j) {
		return
	}
	m.answered.Add(j)
	m.control = max(m.control, 1) // Heard measures it
}

// heard ends a round: the emitter heartbeated, so it is alive (T2).
func (r *Ring) heard() { r.mend.active, r.probedEarly = false, false }

// resolve closes the round at its deadline (see the package comment above).
func (r *Ring) resolve(now int64) Output {
	m := &r.mend
	m.active = false
	if len(m.cands) == 0 || m.cands[0] != r.emitter {
		return Output{} // the ring moved on (LEAVE)
	}
	if m.alive(r.emitter) {
		// The emitter is alive. If its heartbeats have not come yet, it may
		// not have had NEWOBSERVER: it goes again, with δ more to start.
		if r.lastSeq != 0 {
			return Output{}
		}
		r.deadline = max(r.deadline, now+r.cfg.Delta)
		return Output{NewObserverTo: r.emitter, SendNewObserver: true}
	}
	next := slices.IndexFunc(m.cands, func(c ranks.Rank) bool { return m.alive(c) && !r.D.Has(c) })
	silent := m.cands
	if next >= 0 {
		silent = m.cands[:next]
	}
	// The silent candidates not already known dead by a broadcast (those
	// are not ours to report), in one merge.
	dead := r.D.AddRanks(silent)
	frozen, read := m.frozen(dead), len(m.life) // before a new round replaces m
	var out Output
	if next >= 0 {
		r.emitter = m.cands[next]
		out = r.reconnect(now, nil)
	} else {
		r.emitter = m.cands[len(m.cands)-1] // dead: reconnect goes on from there
		out = r.reconnect(now, nil)
		if !r.Alone() && !(m.answered.Has(r.emitter) && slices.Contains(m.canaries, r.emitter)) {
			r.probeRound(now, 2*m.window, &out)
		}
	}
	if len(dead) > 0 {
		// The earlier reports go again: their broadcasts counted the block
		// as alive, and the overlay may have missed a survivor for it.
		more := slices.Concat(dead[1:], r.mend.reported)
		r.mend.reported = append(r.mend.reported, dead...)
		out.Detected = &Detection{Dead: dead[0], More: more, D: r.D.Clone(), At: now, Frozen: frozen, LifeRead: read}
	}
	return out
}
