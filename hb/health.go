package hb

import "github.com/vigil-hpc/vigil/ranks"

// Local health, after Lifeguard (Dadgar, Phillips and Currey, "Lifeguard:
// Local Health Awareness for More Accurate Failure Detection", DSN-W 2018).
//
// A probe round (mend.go) reports a rank on its own silence: it did not
// answer a PROBE within the round's time-out. A live rank's answer goes
// through its event loop and the message path, which a correlated fault
// (many ranks killed or stopped at once, a stalled host) loads for every
// rank at the same moment: answers then arrive late, and a fixed time-out
// would report live ranks, whose eviction is a real failure that loads
// the path further. The ring therefore scores how far it can trust its own
// view of time, 0 (healthy) to MaxHealth, and stretches what a non-answer
// must last by (1 + score):
//
//   - an answer that arrives after half of the round's time-out (the path
//     is slow), once per round;
//   - the driver coming to a round's deadline a quarter time-out late (this
//     rank itself was stalled, and answers may be waiting unread);
//   - the driver coming to a round's deadline more than δ late: this rank
//     was most likely declared dead meanwhile (a SIGSTOP, a swap-out), and
//     the score goes to MaxHealth at once;
//
// each add one (a failure learned from another rank does not: two hosts
// lost at once are still known at their rounds' deadlines). The score falls by one every HealthDecay time-outs without
// a rise. Heartbeat suspicion (T3) is not stretched: it rests on the
// emitter's own heartbeat thread, which a loaded message path does not
// delay, so a single crash is still known at about δ.
//
// Evidence of life (Heard): any message from a rank proves it alive when it
// arrives. A probed rank that sent anything since its round began counts as
// having answered, an answer to an earlier round of the same mending
// included; an emitter that sends messages but whose heartbeats have not
// arrived is not suspected: NEWOBSERVER goes to it again (it may not have
// had it) and SUSP-TIMEOUT is re-armed.

// TailWait bounds, in round time-outs from the round's start, how long a
// round waits for its tail (mend.go): the second rank after Self, probed
// after every candidate, whose answer shows that the round's probes were
// all sent. A round of many candidates takes a while to send; its
// deadline counts from the tail's answer, not from the first probe.
const TailWait = 4

// MaxHealth is the highest local-health score: a probe round's time-out
// grows to at most (1 + MaxHealth) times RingConfig.ProbeTimeout.
const MaxHealth = 8

// HealthDecay is how many probe time-outs the score needs without a rise
// to fall by one.
const HealthDecay = 4

// health is the local-health score.
type health struct {
	score int
	at    int64 // when the score last rose, or last decayed
}

// Health returns the local-health score at now (0: healthy).
func (r *Ring) Health(now int64) int {
	h := &r.health
	if h.score > 0 {
		step := HealthDecay * r.probeTimeout()
		if k := (now - h.at) / step; k > 0 {
			h.score = max(0, h.score-int(k))
			h.at += k * step
		}
	}
	return h.score
}

// distrust raises the score by one (up to MaxHealth) and stretches the open
// probe round's deadline to match.
func (r *Ring) distrust(now int64) {
	if r.Health(now) < MaxHealth {
		r.health.score++
		r.stats.HealthRises++
	}
	r.health.at = now
	if m := &r.mend; m.active {
		m.deadline = max(m.deadline, m.start+r.roundTimeout(now))
	}
}

// roundTimeout is the probe time-out stretched by the local-health score.
func (r *Ring) roundTimeout(now int64) int64 {
	return r.probeTimeout() * int64(1+r.Health(now))
}

// Heard takes a message from rank j, arrived at now, as evidence that j is
// alive: a candidate of the open probe round has answered, and an emitter
// that talks is not suspected before it has been silent for δ.
func (r *Ring) Heard(now int64, j ranks.Rank) {
	if j == r.emitter {
		r.emitterHeard = now
	}
	m := &r.mend
	if !m.active || m.answered.Has(j) || !m.probes(j) {
		return
	}
	m.answered.Add(j)
	if m.control == 0 {
		m.control = max(1, now-m.origin) // the first answer
	}
	m.lastAnswer = now
	if m.firstRT == 0 {
		m.firstRT = max(1, now-m.start)
	}
	if m.hasTail && j == m.tail {
		if k := m.untailed(); k > 0 {
			// The tail's latency beyond a round trip: its probes' sending.
			m.sendCost = max(0, now-m.start-m.firstRT) / int64(k)
		}
		if m.tailHeld {
			m.tailHeld = false
			m.deadline = max(m.start+r.probeTimeout(), now+(1+int64(r.Health(now)))*m.control) // the answers sent just before its
		}
	}
	if !m.late && now-m.start > r.probeTimeout()/2 {
		m.late = true
		r.distrust(now)
	}
}

// RingStats are a ring's counters of how it protected live ranks.
type RingStats struct {
	// HealthRises counts rises of the local-health score.
	HealthRises uint64
	// RoundsStretched counts probe rounds held open past their deadline
	// because the prober came to it stalled (stalled).
	RoundsStretched uint64
	// RoundsWidened counts probe rounds that no answer reached by their
	// deadline, widened instead of resolved (decideRound).
	RoundsWidened uint64
	// BlocksWaited counts rounds without host labels given one more
	// time-out because every candidate was silent while the rank beyond
	// them answered (decideRound).
	BlocksWaited uint64
	// LivesSeen counts probed ranks whose life word showed them alive
	// (life.go).
	LivesSeen uint64
	// Refuted counts suspicions of the emitter withheld because it sent
	// messages within δ (Heard).
	Refuted uint64
	// Held counts suspicions of the emitter withheld because its process
	// was runnable and its thread ran within 2δ: held by the kernel, not
	// dead (life.go).
	Held uint64
}

// Stats returns the ring's counters.
func (r *Ring) Stats() RingStats { return r.stats }

// Stalled tells the ring that this rank itself was stopped or starved
// past δ until now (its heartbeat thread woke that late): as selfStalled.
func (r *Ring) Stalled(now int64) { r.selfStalled(now) }

// selfStalled is this rank finding it was itself silent for longer than δ
// (stopped, or starved): the job has most likely declared it dead, and its
// view of the others is stale. The score goes to its maximum, so that the
// EVICTED notice it is due arrives before any round of its own reports
// anyone.
func (r *Ring) selfStalled(now int64) {
	for r.Health(now) < MaxHealth {
		r.distrust(now)
	}
	r.health.at = now
}

// refute withholds T3 from an emitter that sent a message, or whose
// heartbeat thread ran (its life word, life.go), within δ: it is alive,
// and its heartbeats do not reach this rank, most likely because it has
// not handled NEWOBSERVER yet. SUSP-TIMEOUT is re-armed to δ after that
// sign of life and NEWOBSERVER goes again.
func (r *Ring) refute(now int64) (Output, bool) {
	last := max(r.emitterHeard, r.emitterRan)
	if r.held(now) { // its thread is held, not dead (life.go)
		r.stats.Held++
		r.deadline = min(now+r.cfg.Delta/4, r.emitterRan+2*r.cfg.Delta)
		return Output{}, true
	}
	if last == 0 || now-last >= r.cfg.Delta {
		return Output{}, false
	}
	r.stats.Refuted++
	r.deadline = last + r.cfg.Delta
	return Output{NewObserverTo: r.emitter, SendNewObserver: true}, true
}

// decideRound reports whether the open probe round may be resolved at now
// (see "Controls" in mend.go). Past its deadline it is held open while
// this rank was stalled (stalled); unless the first answer came within an
// eighth of the time-out with a score of 0 (a quiet path, for which the
// deadline is ample), until (3 + score) times as long as the mending's
// first answer took, and (1 + score) times that after the last answer
// (answers still trickling in keep it open); and, on a path seen slow, an eighth of a
// time-out more for the answers that arrived meanwhile (a last call). A
// round that no answer reached at all is widened instead (out carries its
// probes): the same first candidate, twice the window, new canaries
// beyond, its answers kept. A round whose candidates take in every other
// rank not known dead has no control and resolves at its deadline.
func (r *Ring) decideRound(now int64) (out Output, ok bool) {
	m := &r.mend
	if now < m.deadline || r.stalled(now) {
		return Output{}, false
	}
	if len(m.cands) > 0 && m.lives.Has(m.cands[0]) {
		return Output{}, true // the emitter runs: the round reports no one
	}
	if m.hasTail && !m.answered.Has(m.tail) && !r.D.Has(m.tail) && !m.candidateAnswered() && now < m.start+TailWait*r.roundTimeout(now) {
		// The tail's probe went last: until it answers, some probes may
		// still be waiting to be sent (Heard brings the deadline back).
		// Once a candidate answered, the silent ones before it, the only
		// ones the round reports, were probed before it: no need to wait.
		m.tailHeld = true
		m.deadline = m.start + TailWait*r.roundTimeout(now)
		return Output{}, false
	}
	if m.control == 0 {
		if len(m.canaries) == 0 {
			return Output{}, true
		}
		r.widen(now, &out)
		return out, false
	}
	if r.cfg.Hosts == nil && !m.blockWaited && !m.candidateAnswered() && m.beyondAnswered() {
		// Every candidate silent, the rank beyond them alive: without host
		// labels, a dead block ending exactly where the window ends is
		// rare, and a window of slow candidates (their event loops starved
		// while one canary was not) looks the same. One more time-out.
		m.blockWaited = true
		m.deadline = now + r.roundTimeout(now)
		r.stats.BlocksWaited++
		return Output{}, false
	}
	h := int64(r.Health(now))
	quiet := h == 0 && m.control <= r.probeTimeout()/8 // a prompt control: the deadline is ample
	if d := max(m.origin+(3+h)*m.control, m.lastAnswer+(1+h)*m.control); !quiet && now < d {
		m.deadline = d
		return Output{}, false
	}
	if !m.lastCall && !quiet {
		// Answers that reached this host while the decision was due are
		// read first: the driver goes back to its input once more (on a
		// path seen slow).
		m.lastCall = true
		m.deadline = now + r.probeTimeout()/8
		return Output{}, false
	}
	return Output{}, true
}

// stalled reports whether the driver came to the open probe round's
// deadline so late that this rank itself was stalled: answers may be
// waiting unread, so the round is held open a quarter time-out longer
// (once per round) and the score rises.
func (r *Ring) stalled(now int64) bool {
	m := &r.mend
	quarter := r.probeTimeout() / 4
	if m.heldOpen || now-m.deadline <= quarter {
		return false
	}
	m.heldOpen = true
	r.stats.RoundsStretched++
	if now-m.deadline > r.cfg.Delta {
		r.selfStalled(now)
	}
	r.distrust(now)
	m.deadline = max(m.deadline, now+quarter)
	return true
}
