package detector

import (
	"log/slog"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// Fail-stop enforcement, outside seed 000 (which assumes crash failures):
// a rank declared dead that resumes (after a SIGSTOP, a long swap-out…)
// still heartbeats its old observer or still sends messages. It is told it
// is evicted (EVICTED), so that it stops instead of suspecting live ranks
// with stale knowledge. The heartbeat words are the driver's input
// (WantWords, Words); hb.Zombies remembers them and rate-limits the
// notices.

// WantWords returns the ranks whose heartbeat words (the words they store
// in this rank's memory) the zombie check wants now, nil for none: the
// ranks newly held dead, whose words then are where their growth counts
// from, and every rank held once the housekeeping found the check due
// (Tick). Only with Config.Zombies. The driver loads them and hands them
// to Words at once.
func (c *Core) WantWords() []ranks.Rank {
	if !c.cfg.Zombies || c.evicted {
		return nil
	}
	if c.wake.zombiesDue {
		return c.zombies.Ranks()
	}
	return c.zombies.Fresh()
}

// Words hands the Core the heartbeat words of ranks rs, loaded at now
// (words[i] is rs[i]'s, as WantWords asked): a rank held dead whose word
// grew since it was last seen is a zombie, told it is evicted.
func (c *Core) Words(now Time, rs []ranks.Rank, words []uint64) {
	if c.evicted {
		return
	}
	c.wake.zombiesDue = false
	for _, r := range c.zombies.Saw(rs, words) {
		c.evict(r, now.Mono)
	}
}

// evict sends EVICTED to r, at most every hb.EvictInterval.
func (c *Core) evict(r ranks.Rank, now int64) {
	if !c.zombies.Due(r, now) {
		return
	}
	c.stats.Evictions++
	c.log(slog.LevelWarn, "rank held dead is alive: evicting it", "zombie", r)
	c.send([]ranks.Rank{r}, &wire.Evicted{Rank: r, Live: uint32(c.cfg.Size - c.ring.Dead().Len())})
}

// onEvicted handles EVICTED: this rank was declared dead. It stops
// heartbeating and suspecting (Ready.Evicted).
//
// An EVICTED from a rank this rank holds dead is mutual suspicion: either
// the sender is a zombie with stale knowledge (paused, or its host's link
// slowed past δ, it held this rank dead, and it may not yet know of the
// deaths this rank has learned, so its count of live ranks is no evidence)
// and this rank must go on, or this rank was cut off from the job and
// declared the others dead (a partition, healed). Only the second obeys,
// and only where it can arise: under PartitionContinue, on a rank holding
// more than half of the job dead (one that probes, split.go), and when
// the sender holds more ranks alive (m.Live) than this rank does, so the
// minority side of a healed partition stops and the majority goes on,
// however many ranks the job lost before; a tie stops nobody. By default
// a minority side has stopped before the heal, by the quorum rule
// (quorum.go), and an EVICTED from a rank held dead is never obeyed.
func (c *Core) onEvicted(from ranks.Rank, m *wire.Evicted) {
	D := c.ring.Dead()
	live := uint32(c.cfg.Size - D.Len())
	if m.Rank != c.cfg.Self || (D.Has(from) && (!c.minority() || m.Live <= live)) {
		c.bad("dropping EVICTED", "from", from, "named", m.Rank, "sender_live", m.Live, "live", live)
		return
	}
	c.evicted = true
	c.log(slog.LevelError, "this rank was declared dead by the job; stopping (fail-stop)", "told_by", from)
	c.ring.Leave()
	c.rd.Evicted = true
}
