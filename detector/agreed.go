package detector

import (
	"log/slog"
	"slices"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
)

// The agreed dead set: how a rank that some survivors hold dead and
// others hold alive is settled, outside seeds 000 and 001.
//
// The rule is "once reported, dead". A rank enters a dead set only on its
// own silence (its observer found its heartbeat missing for δ), so a rank
// named dead anywhere did miss its δ; it is dead to the job and is never
// reinstated. Its report may still reach only some ranks: in a burst the
// broadcast loses forwarders, and a stopped rank that resumes lives on,
// held dead by the ranks the report reached and alive by the others. The
// zombie check and the dead-list repair (zombies.go, repair.go) close the
// gap as soon as traffic crosses it; an agreement closes it at once. ERA
// decides, with F over the values, the union of the contributors' dead
// sets, the same at every decider. Every decider adopts it: the ranks of
// the decision it held alive it now learns as crashes (their Event's
// Detector is the rank itself: no observer's report reached this rank),
// and a decider named in it was declared dead by the job and stops
// (fail-stop, as on EVICTED). So after an agreement every survivor holds
// the same dead set as the application's decision, and the rank the
// survivors disagreed about is stopped, whichever side it was on.
//
// Only delivered decisions are adopted: one held back by the quorum rule
// (quorum.go) is a minority side's, and that side stops.

// decided delivers decision d (Ready.Decisions) and queues its dead set
// for adoption; adoptAgreed carries it out once the era cores' outputs
// are done.
func (c *Core) decided(d Decision) {
	c.rd.Decisions = append(c.rd.Decisions, d)
	st := c.agree
	if d.Dead.Has(c.cfg.Self) {
		st.named = true
	}
	D := c.ring.Dead()
	for _, r := range d.Dead.Members() {
		if r != c.cfg.Self && !D.Has(r) {
			st.adopt = append(st.adopt, r)
		}
	}
}

// adoptAgreed adopts the dead sets of the decisions delivered since the
// last call (decided), at the time of the input that decided them.
func (c *Core) adoptAgreed() {
	st := c.agree
	if st.adopting {
		return // the outer call goes on until nothing is queued
	}
	st.adopting = true
	defer func() { st.adopting = false }()
	now := c.at
	for !c.evicted && (st.named || len(st.adopt) > 0) {
		if st.named {
			st.named, st.adopt = false, nil
			c.evicted = true
			c.log(slog.LevelError, "this rank is in an agreement's dead set: declared dead by the job; stopping (fail-stop)")
			c.ring.Leave()
			c.rd.Evicted = true
			return
		}
		adopt := st.adopt
		st.adopt = nil
		if c.ring.Left() {
			return
		}
		observer := c.ring.Observer()
		fresh, observerChanged := c.ring.Learn(now.Mono, adopt)
		if observerChanged {
			c.retarget()
			if slices.Contains(fresh, observer) {
				c.evict(observer, now.Mono) // as for a broadcast (core.go): it must stop before it suspects us
			}
		}
		if len(fresh) == 0 {
			continue
		}
		c.stats.DeathsAgreed += uint64(len(fresh))
		c.log(slog.LevelWarn, "adopting an agreement's dead set: ranks held alive here are dead", "ranks", fresh)
		for _, r := range fresh {
			c.deliver(now, bcast.Message{Kind: bcast.Failed, Dead: []ranks.Rank{r}, Detector: r, DetectedAt: now.Wall}, []ranks.Rank{r})
		}
	}
}
