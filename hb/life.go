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
// candidate's life word instead, which that thread raises at every period
// (heartbeat.EmitterConfig.Life). A word that grows during a round shows
// that the candidate runs: it counts as an answer when the round is
// resolved, so that the candidate is never reported and may be the next
// emitter, whenever its message comes. A word that does not grow, or
// cannot be read (another host, not mapped yet), shows nothing: the
// round's time-outs and controls decide as before, and life words never
// shorten them. So for the emitter: a life word that grows withholds T3
// as a message from it does (refute, health.go). Its heartbeats may not
// reach this rank while it runs: a new emitter's start once its event
// loop has handled NEWOBSERVER, and those to an observer whose memory it
// has not mapped yet go through its Go runtime, both late when a burst
// loads every event loop of the host. Over shared memory the word is as
// good a sign as a heartbeat: the same thread, read through the same kind
// of mapping. The words are the driver's input (WantLife, Life).

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
// being mapped, or on another host); and the emitter.
func (r *Ring) WantLife(now int64) []ranks.Rank {
	if !r.started || r.left || r.Alone() {
		return nil
	}
	var rs []ranks.Rank
	key := lifeKey{true, r.emitter, r.D.Len()}
	switch {
	case r.mend.active:
		rs = r.mend.probed()
	case r.cfg.Probe > 0 && (r.lifeWarm != key || r.lifeRetry != 0 && now >= r.lifeRetry):
		r.lifeWarm, r.lifeRetry = key, 0
		m := mendState{cands: r.candidates(r.emitter, r.cfg.Probe)} // the emitter first
		r.setCanaries(&m)
		rs = m.probed()
	}
	if !slices.Contains(rs, r.emitter) {
		rs = append(rs, r.emitter)
	}
	return rs
}

// Life takes the life words of ranks rs at now (words[i] is rs[i]'s; 0
// for a word the driver could not read). The first word of a probed rank
// in a round is where its growth counts from; a word above it shows the
// rank alive. So for the emitter. Other ranks are ignored.
func (r *Ring) Life(now int64, rs []ranks.Rank, words []uint64) {
	rs = rs[:min(len(rs), len(words))]
	if i := slices.Index(rs, r.emitter); i >= 0 && words[i] != 0 {
		r.emitterLife(now, words[i])
	}
	m := &r.mend
	if !m.active {
		if slices.Contains(words, 0) && r.lifeRetry == 0 {
			r.lifeRetry = now + r.cfg.Delta // ask again for the words not read
		}
		return
	}
	for i, j := range rs {
		w := words[i]
		if w == 0 || !m.probes(j) {
			continue
		}
		base, ok := m.life[j]
		if !ok {
			if m.life == nil {
				m.life = make(map[ranks.Rank]uint64)
			}
			m.life[j] = w
			continue
		}
		if w > base && m.lives.Add(j) {
			r.stats.LivesSeen++
		}
	}
}

// emitterLife takes the emitter's life word w: a word above the last one
// seen shows it alive, as a message from it would (Heard).
func (r *Ring) emitterLife(now int64, w uint64) {
	switch {
	case r.emitterWord == 0:
		r.emitterWord = w
	case w > r.emitterWord:
		r.emitterWord = w
		r.emitterHeard = now
	}
}

// alive reports whether j answered the round, by a message or by its life
// word.
func (m *mendState) alive(j ranks.Rank) bool { return m.answered.Has(j) || m.lives.Has(j) }
