package detector

import (
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// Healing a partition under PartitionContinue (quorum.go), outside the
// seeds. By default the minority side of a partition stops before the
// heal; with PartitionContinue both sides go on, and a rank cut off from
// the job (its host's link down for longer than δ) declares the rest of
// the job dead, and the rest declares it dead; neither side sends anything
// to ranks it holds dead, so when the link comes back nothing crosses it
// and the split would stay. A rank that holds more than half of the job
// crashed — it is on the minority side of a split, or the job really lost
// most of its ranks — therefore sends, once per δ, a split probe (PROBE of
// round 0, which asks for no answer) to the next of them, round robin. A
// rank of the majority that receives it holds the sender dead and tells it
// it is evicted (zombies.go), which the sender obeys since it holds at
// least half of the job dead. A rank that holds at most half of the job
// dead never probes, so a healthy job pays nothing, and the probe cannot
// make a live rank obey anything: it is answered only by an EVICTED from a
// rank that holds the prober dead. A tie (a 50/50 split) is not resolved
// in this mode.

// splitState is the split probes' schedule.
type splitState struct {
	next   int64      // when the next probe is due (monotonic ns)
	cursor ranks.Rank // the last rank probed
}

// minority reports whether this rank probes: under PartitionContinue, while
// it holds more than half of the job dead.
func (c *Core) minority() bool {
	return c.cfg.Partition == PartitionContinue && 2*c.ring.Dead().Len() > c.cfg.Size
}

// probeSplit sends the split probe due at now, if any.
func (c *Core) probeSplit(now int64) {
	if !c.minority() || now < c.split.next {
		return
	}
	c.split.next = now + c.cfg.SuspectTimeout
	var first, next ranks.Rank
	found, wrapped := false, false
	for _, r := range c.ring.Dead().Members() {
		if ev, ok := c.gone.get(r); !ok || ev.Left || r == c.cfg.Self {
			continue // a departed rank is not coming back
		}
		if !found {
			first, found = r, true
		}
		if r > c.split.cursor {
			next, wrapped = r, true
			break
		}
	}
	if !found {
		return
	}
	if !wrapped {
		next = first
	}
	c.split.cursor = next
	c.stats.SplitProbes++
	c.send([]ranks.Rank{next}, &wire.Probe{Round: 0})
}
