package daemon

import (
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// Fail-stop of daemons, as node.Node does for ranks (seed 000 assumes
// crash failures): a daemon declared dead that resumes is told so and stops.

// recordDead remembers the slot word of daemons that joined D, to spot
// them heartbeating later (zombies).
func (d *Daemon) recordDead(nodes []ranks.Rank) {
	for _, r := range nodes {
		d.zombies.Hold(r, d.slots.Load(r))
	}
}

// checkZombies looks for heartbeats from daemons in D: a daemon declared
// dead that resumed still heartbeats its old observer. It is told to stop.
func (d *Daemon) checkZombies(now int64) {
	for _, r := range d.zombies.Moved(d.slots) {
		d.evict(r, now)
	}
}

// evict sends EVICTED to r, at most every hb.EvictInterval.
func (d *Daemon) evict(r ranks.Rank, now int64) {
	if !d.zombies.Due(r, now) {
		return
	}
	d.log.Warn("daemon held dead is alive: evicting it", "zombie", r)
	d.send(r, wire.AppendDaemon(nil, &wire.DaemonEvicted{Rank: r}))
}

// onEvicted handles EVICTED from a live daemon: this node was declared
// dead with all its processes. The daemon stops heartbeating, kills its
// children and signals Evicted(); the caller should Close and exit.
func (d *Daemon) onEvicted(from ranks.Rank, m *wire.DaemonEvicted) {
	if m.Rank != d.cfg.Node || d.ring.Dead().Has(from) || d.isEvicted() {
		d.bad.Add(1)
		return
	}
	d.log.Error("this node was declared dead by the other daemons; stopping (fail-stop)", "told_by", from)
	d.em.Pause()
	d.ring.Leave()
	for _, lp := range d.locals {
		if lp.child != nil && !lp.gone {
			lp.child.Process.Kill()
		}
		if lp.cc != nil {
			lp.cc.close()
		}
	}
	close(d.evicted)
}

func (d *Daemon) isEvicted() bool {
	select {
	case <-d.evicted:
		return true
	default:
		return false
	}
}

// Evicted is closed when this daemon learns that the others declared its
// node dead (it was paused or cut off for longer than δ). Its children are
// killed then and it takes no further part: close it and exit.
func (d *Daemon) Evicted() <-chan struct{} { return d.evicted }
