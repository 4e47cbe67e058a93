package hb

import (
	"slices"

	"github.com/vigil-hpc/vigil/ranks"
)

// Life words. A probe's answer comes from the candidate's event loop, an
// ordinary thread: when a correlated fault loads every event loop of a
// host at once, a live candidate may answer later than any round waits,
// while its heartbeat thread, real-time, is on time. A prober that maps a
// candidate's memory (ranks of one host, over shared memory) reads the
// candidate's life word instead, where that thread stores the time of
// each of its periods (heartbeat.EmitterConfig.Life; the host's
// CLOCK_MONOTONIC, which is the ring's clock in the runtime): one load
// tells when the thread last ran. A candidate whose thread ran after the
// round began counts as an answer when the round is resolved, so that it
// is never reported and may be the next emitter, whenever its message
// comes. A word that is older, or cannot be read (another host, not
// mapped yet), or lies ahead of this rank's clock (another clock: no
// evidence) shows nothing: the round's time-outs and controls decide as
// before, and life words never shorten them. So for the emitter: a thread
// that ran within δ withholds T3 as a message from it does (refute,
// health.go). Its heartbeats may not reach this rank while it runs: a new
// emitter's start once its event loop has handled NEWOBSERVER, and those
// to an observer whose memory it has not mapped yet go through its Go
// runtime, both late when a burst loads every event loop of the host.
// Over shared memory the word is as good a sign as a heartbeat: the same
// thread, read through the same kind of mapping. The words are the
// driver's input (WantLife, Life).

// LifeDeparted is the life word of a rank that left the job cleanly: its
// heartbeat thread stores it instead of the time of its periods once the
// rank's LEAVE is sent (heartbeat.Emitter.Depart). A reader takes it as
// that LEAVE (detector.Core.Life): an observer whose emitter's LEAVE is
// late or lost (a whole job stopping on a loaded host) learns the
// departure from one load instead of reporting a crash. As a time it lies
// ahead of every clock, so ran takes it for no evidence of a run.
const LifeDeparted = ^uint64(0)

// lifeKey is the ring's view a set of warmed-up ranks was computed for.
type lifeKey struct {
	warmed  bool
	emitter ranks.Rank
	dead    int
}

// WantLife returns the ranks whose life words the ring wants at now, nil
// for none: every rank the open probe round probes; with no round open,
// the ranks a round would probe if the emitter failed now, so that the
// driver maps their memory ahead of need (once for each emitter and dead
// set, and again δ later while some of their words could not be read:
// being mapped, or on another host); and the emitter. The slice is the
// ring's, valid until the next call.
func (r *Ring) WantLife(now int64) []ranks.Rank {
	if !r.started || r.left || r.Alone() {
		return nil
	}
	rs := r.lifeBuf[:0]
	key := lifeKey{true, r.emitter, r.D.Len()}
	switch {
	case r.mend.active:
		rs = r.mend.appendProbed(rs)
	case r.cfg.Probe > 0 && (r.lifeWarm != key || r.lifeRetry != 0 && now >= r.lifeRetry):
		r.lifeWarm, r.lifeRetry = key, 0
		m := mendState{cands: r.candidates(r.emitter, r.cfg.Probe)} // the emitter first
		r.setCanaries(&m)
		rs = m.appendProbed(rs)
	}
	if !slices.Contains(rs, r.emitter) {
		rs = append(rs, r.emitter)
	}
	r.lifeBuf = rs
	return rs
}

// Life takes the life words of ranks rs at now (words[i] is rs[i]'s, 0
// for a word the driver could not read). A probed rank whose word shows
// its thread ran after the round began is alive; so is the emitter whose
// thread ran within δ (refute). Other ranks are ignored.
func (r *Ring) Life(now int64, rs []ranks.Rank, words []uint64) {
	rs = rs[:min(len(rs), len(words))]
	if i := slices.Index(rs, r.emitter); i >= 0 {
		if t, ok := r.ran(now, words[i]); ok {
			r.emitterRan, r.emitterRead = max(r.emitterRan, t), now
		}
	}
	m := &r.mend
	if !m.active {
		if slices.Contains(words, 0) && r.lifeRetry == 0 {
			r.lifeRetry = now + r.cfg.Delta // ask again for the words not read
		}
		return
	}
	for i, j := range rs {
		t, ok := r.ran(now, words[i])
		if !ok || !m.probes(j) {
			continue
		}
		if m.life == nil {
			m.life = make(map[ranks.Rank]int64)
		}
		m.life[j] = max(m.life[j], t)
		if t > m.start && m.lives.Add(j) {
			r.stats.LivesSeen++
		}
	}
}

// ran returns the time life word w says its heartbeat thread last ran,
// false for a word not read (0) or further ahead of now than δ: the
// writer's clock is not this rank's (a time namespace), and its words
// show nothing.
func (r *Ring) ran(now int64, w uint64) (int64, bool) {
	if w == 0 || w > uint64(now+r.cfg.Delta) {
		return 0, false
	}
	return int64(w), true
}

// alive reports whether j answered the round, by a message or by its life
// word.
func (m *mendState) alive(j ranks.Rank) bool { return m.answered.Has(j) || m.lives.Has(j) }

// Held threads. The kernel may hold a real-time thread back for tens of
// milliseconds: its fair server runs the normal threads of a CPU for up
// to 50 ms a second once the real-time threads used up their share, as a
// host's agents, all real-time, do while they absorb a burst. A held
// heartbeat thread stops its heartbeats and its life word together, as a
// dead one does; its process, though, is runnable, where a dead rank's
// is gone and a stopped one's is stopped. So an emitter whose life word
// was read, whose thread ran within 2δ and whose process the driver found
// runnable at this turn (same host only) is not suspected yet: its
// heartbeats are overdue, not missing. A hung process (runnable, its
// thread stuck) is reported at 2δ instead of δ; a crash or a SIGSTOP as
// before.

// WantRunnable returns the emitter when the ring wants to know whether its
// process is runnable (Runnable): its life word was read and showed no
// run for δ/2.
func (r *Ring) WantRunnable(now int64) (ranks.Rank, bool) {
	if !r.started || r.left || r.Alone() || r.emitterRan == 0 || now-r.emitterRan < r.cfg.Delta/2 {
		return 0, false
	}
	return r.emitter, true
}

// Runnable tells the ring that rank j's process was found runnable at now
// (WantRunnable): the emitter's held thread is not taken for a dead one.
func (r *Ring) Runnable(now int64, j ranks.Rank) {
	if j == r.emitter {
		r.emitterRunnable = now
	}
}

// held reports whether the emitter's thread is held rather than dead: its
// process was found runnable at this turn (within δ/8 of now) and the
// thread ran within 2δ.
func (r *Ring) held(now int64) bool {
	return r.emitterRan != 0 && r.emitterRunnable != 0 && now-r.emitterRunnable < r.cfg.Delta/8 && now-r.emitterRan < 2*r.cfg.Delta
}
