package detector

import (
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

// Life words (hb/life.go): a probe round also takes, as its candidates'
// answers, the life words their heartbeat threads raise at every period,
// where the driver can read them (ranks of one host, over shared memory).
// The driver loads the words WantLife asks for and hands them to Life at
// once (the slice is the Core's, valid until the next call), at every
// turn of its loop: before Tick, so that a round about to
// close sees the latest words, and before Ready, so that a round just
// opened has its first ones.

// WantLife returns the ranks whose life words the Core wants at now, nil
// for none (hb.Ring.WantLife).
func (c *Core) WantLife(now Time) []ranks.Rank {
	if c.evicted {
		return nil
	}
	return c.ring.WantLife(now.Mono)
}

// Life hands the Core the life words of ranks rs, loaded at now (words[i] is rs[i]'s, 0
// for a word the driver could not read), as WantLife asked.
//
// A word that says hb.LifeDeparted is that rank's LEAVE: the rank left the
// job cleanly, and this rank takes it as departed (as Step takes a LEAVE)
// instead of reporting its silence, even if the LEAVE itself is late or
// lost.
func (c *Core) Life(now Time, rs []ranks.Rank, words []uint64) {
	if c.evicted {
		return
	}
	c.ring.Life(now.Mono, rs, words)
	if c.ring.Left() {
		return
	}
	for i, w := range words[:min(len(rs), len(words))] {
		r := rs[i] // rs stays valid: only WantLife rewrites it
		if w != hb.LifeDeparted || r == c.cfg.Self || c.ring.Dead().Has(r) {
			continue
		}
		c.departed[r] = true
		out, err := c.ring.Departed(now.Mono, r, r)
		if err != nil {
			c.bad("dropping a departure read from a life word", "rank", r, "err", err)
			continue
		}
		c.stats.DeparturesRead++
		c.apply(now, out)
	}
}

// WantRunnable returns the emitter when the Core wants to know whether its
// process is runnable on this host (hb.Ring.WantRunnable); the driver
// answers with Runnable when it found it so, before Observe.
func (c *Core) WantRunnable(now Time) (ranks.Rank, bool) {
	if c.evicted {
		return 0, false
	}
	return c.ring.WantRunnable(now.Mono)
}

// Runnable tells the Core that rank r's process was found runnable at now
// (hb.Ring.Runnable): a heartbeat thread held by the kernel, not a dead
// one.
func (c *Core) Runnable(now Time, r ranks.Rank) {
	if !c.evicted {
		c.ring.Runnable(now.Mono, r)
	}
}
