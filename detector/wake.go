package detector

import (
	"math"
	"time"

	"github.com/vigil-hpc/vigil/hb"
)

// Never is NextWake's answer when nothing in the Core is due: the driver
// waits for a message, a request or its checks' alarm.
const Never = int64(math.MaxInt64)

// The timing contract. A driver waits for the earliest of a message, a
// record of its checks' alarm (Config.Alarm) and NextWake; then it hands
// over what its host shows (the life words WantLife asks for to Life, the
// emitter's process found runnable to Runnable when WantRunnable asks,
// its own heartbeat thread's stall past δ to Stalled), calls Tick and
// Observe with the checks' latest record (Step for a message), carries
// out Ready, hands the words WantWords asks for to Words, and asks
// NextWake again. No driver combines the Core's deadlines itself.

// wakeState is what NextWake needs besides the ring.
type wakeState struct {
	rec        hb.WatchRecord // the record Observe took last
	nextHouse  int64          // when Tick's housekeeping is next due
	zombiesDue bool           // the housekeeping wants the zombies' words
}

// NextWake returns when the driver must next call Tick and Observe
// (monotonic ns, not before now) if no message and no alarm comes first,
// or Never.
//
// The ring's part: while the emitter is heard and the checks' alarm
// (Config.Alarm) guards its silence, Never: SUSP-TIMEOUT's expiry is
// Config.SuspectTimeout after the last growth the checks saw, and the
// alarm rings once the emitter has been silent for Alarm (≤ δ) since that
// growth or a later one, at the first check of that silence, so no later
// than a wake at the deadline would have seen a check after it; a quiet
// job costs the driver no wake. Otherwise (the alarm rang; a longer
// deadline: the start-up grace, 2δ after a reconnection; a probe round
// open; no alarm): the ring's deadline, but at most δ away (a long
// deadline must not hide the heartbeats that reset it), or, once it passed
// with no check after it yet, a quarter check period later. The rest:
// the housekeeping while there is work for it, a timed propagation's next
// step.
func (c *Core) NextWake(now int64) int64 {
	if c.evicted {
		return Never
	}
	at := c.ringWake(now)
	if c.busy() {
		at = min(at, max(c.wake.nextHouse, now))
	}
	if due := c.prop.Next(); due != 0 {
		at = min(at, max(due, now))
	}
	return at
}

// ringWake is NextWake's part for the ring.
func (c *Core) ringWake(now int64) int64 {
	r := c.ring
	if r.Alone() || r.Left() {
		return Never // nothing to observe
	}
	delta := c.cfg.SuspectTimeout
	d := r.Deadline()
	if c.cfg.Alarm > 0 {
		d = r.SuspectDeadline() // the early probes come by alarm
		rec := c.wake.rec
		if !r.Probing() && rec.Emitter == r.Emitter() && d == rec.GrewAt+delta && now-rec.GrewAt < c.cfg.Alarm {
			return Never // the alarm wakes the driver
		}
	}
	if d > now {
		return min(d, now+delta)
	}
	return now + max(c.cfg.CheckPeriod/4, int64(time.Microsecond))
}

// busy reports whether Tick's housekeeping has work: zombies to watch,
// agreements to nudge, dead-list questions or a ring push waiting
// (repair.go), a timed
// propagation in progress, or split probes to send (split.go).
func (c *Core) busy() bool {
	return (c.cfg.Zombies && c.zombies.Len() > 0) || c.agree.used() || len(c.repair.later) > 0 || c.repair.pushDue != 0 ||
		c.prop.Next() != 0 || c.minority()
}

// Propagating reports whether a timed propagation (Config.Gossip) is in
// progress, for inspection.
func (c *Core) Propagating() bool { return c.prop.Next() != 0 }
