package sim

import (
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/ranks"
)

// The observer side of a simulated rank: its heartbeat thread's checks
// (watch.go) and the Core's driver, which does what the node runtime's
// event loop does. It wakes for a message, for the checks' silence alarm
// and at the Core's NextWake, and then ticks the Core, hands it the
// checks' record (Observe: the only way into a suspicion), carries out
// Ready and asks NextWake again. The checks run every Check (Check = 0:
// continuously, at every heartbeat and every wake, with no stall guard).
// With HeartbeatsFull every check is simulated; with HeartbeatsSkip the
// record at any time and the next alarm are computed in closed form from
// the heartbeats the emitter sent, and an observer whose emitter
// heartbeats it steadily schedules nothing (dormant) until that emitter
// dies or turns away.

// alarm is the silence at which the checks wake the driver: the early
// probes' ProbeAfter with them, else δ (as the node runtime's).
func (c *DetectorConfig) alarm() int64 {
	if c.Probe > 0 && c.ProbeAfter > 0 {
		return c.ProbeAfter
	}
	return c.Delta
}

// word is the slot word of the emitter under watch, for the full mode's
// checks: the heartbeats of the current emitter landed since it was set.
func (nd *dnode) word(ranks.Rank) uint64 { return nd.slot }

// drive is one turn of the driver's loop at rank q at now: Tick, Observe
// with the checks' record, flush, and the next wake and alarm. With a
// network whose receives cost the receiver (LogP with RecvContention) the
// loop is the receiver: while it is still handling messages that reached
// it, the turn waits until they are handled (once), as node.loop handles
// the messages waiting in its inbox before it looks at the checks.
func (d *Detector) drive(q uint32, now int64) {
	nd := &d.nodes[q]
	if b, ok := d.ports.(recvBusy); ok && !nd.deferred {
		if until := b.recvBusy(q); until > now {
			nd.deferred = true
			d.en.Schedule(Event{At: until, Kind: evWake, Node: q, A: 1})
			return
		}
	}
	nd.deferred = false
	switch {
	case d.skip():
		d.skipRecord(q, now)
		if d.cfg.Check == 0 {
			nd.w.alarmDue(now) // this wake is a check too
		}
	case d.cfg.Check == 0:
		nd.w.check(now, nd.word)
	}
	core := nd.core
	t := coreTime(now)
	started := core.Stats().BcastsStarted
	core.Tick(t)
	core.Observe(t, nd.w.rec)
	d.res.Detections += int(core.Stats().BcastsStarted - started)
	d.flush(q, now, true)
	d.reschedule(q, now)
}

// reschedule books rank q's next wake (the Core's NextWake) and, unless
// the full mode's periodic checks ring it themselves, the checks' next
// alarm, after an event at now.
func (d *Detector) reschedule(q uint32, now int64) {
	nd := &d.nodes[q]
	if !nd.alive {
		return
	}
	at := nd.core.NextWake(now)
	if at == detector.Never {
		at = 0
	}
	if at != nd.wakeAt {
		nd.wakeAt = at
		nd.wakeStamp++
		if at != 0 {
			d.en.Schedule(Event{At: at, Kind: evWake, Node: q, B: nd.wakeStamp})
		}
	}
	if d.skip() || d.cfg.Check == 0 {
		d.scheduleAlarm(q, now, true)
	}
}

// onWatch is a periodic check (full mode) or a predicted alarm.
func (d *Detector) onWatch(e Event, now int64) {
	q := e.Node
	nd := &d.nodes[q]
	if !nd.alive {
		return
	}
	if e.A == 1 { // full mode's periodic check
		d.en.Schedule(Event{At: now + d.cfg.Check, Kind: evWatch, Node: q, A: 1})
		if nd.w.check(now, nd.word) {
			d.drive(q, now)
		}
		return
	}
	if e.B != nd.alarmStamp {
		return // superseded
	}
	nd.alarmAt = 0
	var rang bool
	if d.skip() {
		d.skipRecord(q, now)
		rang = nd.w.alarmDue(now)
	} else {
		rang = nd.w.check(now, nd.word)
	}
	if rang {
		d.drive(q, now)
		return
	}
	d.scheduleAlarm(q, now, true)
}

// wake tells observer q that its emitter died or turned away: its checks'
// alarm may ring again.
func (d *Detector) wake(q uint32, now int64) {
	d.nodes[q].dormant = false
	d.scheduleAlarm(q, now, false)
}

// scheduleAlarm books the earliest time at which q's checks may ring
// their alarm, given the record as last computed: a growth since only
// makes it later, which the alarm's event finds and books again. strict:
// the check at now, if any, already ran.
func (d *Detector) scheduleAlarm(q uint32, now int64, strict bool) {
	nd := &d.nodes[q]
	w := &nd.w
	at := int64(0)
	if nd.alive && !nd.dormant && w.silence > 0 && nd.core.Emitter() != ranks.Rank(q) {
		grew := w.rec.GrewAt
		if w.pending {
			grew = nd.since
		}
		at = max(grew+w.silence, w.alarmedAt+w.silence, now)
		if c := d.cfg.Check; c > 0 {
			at = d.tickCeil(nd, at)
			if strict && at == now {
				at += c
			}
		} else if strict && at == now {
			at++
		}
	}
	if at != nd.alarmAt {
		nd.alarmAt = at
		nd.alarmStamp++
		if at != 0 {
			d.en.Schedule(Event{At: at, Kind: evWatch, Node: q, A: 2, B: nd.alarmStamp})
		}
	}
}

// skipRecord brings rank q's record up to its checks at or before x, in
// closed form: a set is applied by the first check after it, the largest
// heartbeat landed by the last check is the word, and the check that first
// saw it is GrewAt. It decides whether q is dormant: its emitter
// heartbeats it steadily, so no alarm can ring until that emitter dies or
// turns away (kill and retarget wake it).
func (d *Detector) skipRecord(q uint32, x int64) {
	nd := &d.nodes[q]
	w := &nd.w
	c := d.cfg.Check
	tq := x
	if c > 0 {
		tq = d.tickFloor(nd, x)
	}
	if w.pending {
		apply := nd.since
		if c > 0 {
			apply = d.tickFloor(nd, nd.since) + c
		}
		if tq < apply {
			return // no check since the set: the record is the previous emitter's
		}
		w.pending = false
		w.rec.Emitter, w.rec.Seq, w.rec.GrewAt = w.want, 0, w.setAt
	}
	p := uint32(w.rec.Emitter)
	if p != q {
		if seq, arr, sent, ok := d.lastHeartbeat(p, q, nd.since, tq); ok && seq > nd.slot {
			nd.slot, nd.lastSent = seq, sent
			w.rec.Seq, w.rec.GrewAt = seq, arr
			if c > 0 {
				w.rec.GrewAt = d.tickCeil(nd, arr)
			}
		}
	}
	w.rec.CheckedAt = max(tq, w.rec.CheckedAt)
	pn := &d.nodes[p]
	nd.dormant = p != q && pn.alive && uint32(pn.core.Observer()) == q && nd.lastSent >= pn.changes[len(pn.changes)-1].at
}

// tickFloor returns the time of nd's last check at or before t.
func (d *Detector) tickFloor(nd *dnode, t int64) int64 {
	c := d.cfg.Check
	if t < nd.cphase {
		return nd.cphase - c
	}
	return nd.cphase + (t-nd.cphase)/c*c
}

// tickCeil returns the time of nd's first check at or after t.
func (d *Detector) tickCeil(nd *dnode, t int64) int64 {
	c := d.cfg.Check
	if t <= nd.cphase {
		return nd.cphase
	}
	return nd.cphase + (t-nd.cphase+c-1)/c*c
}
