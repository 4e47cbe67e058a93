package sim

import (
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

// watch is the simulated heartbeat thread's checks: heartbeat.Watch's
// check (vg_watch_check in heartbeat/native.c) in Go, producing the same
// hb.WatchRecord from the same sequence of Set, word and check, stall
// guard and silence alarm included (TestWatchMatchesHeartbeatWatch). The
// simulator hands its record to detector.Core.Observe, as the runtime
// hands heartbeat.Watch.Record.
type watch struct {
	rec hb.WatchRecord
	// Set's request, applied by the next check.
	want    ranks.Rank
	setAt   int64
	pending bool
	// last is when the previous check ran, alarmedAt when the alarm last
	// rang.
	last, alarmedAt int64
	// guard is the stall guard and silence the alarm's silence (0: none).
	guard, silence int64
}

// set asks the checks to watch emitter from now on (heartbeat.Watch.Set).
func (w *watch) set(emitter ranks.Rank, now int64) {
	w.want, w.setAt, w.pending = emitter, now, true
}

// check is one check at now that loads word, the watched emitter's slot
// word (after applying a pending set). It reports whether the silence
// alarm rings.
func (w *watch) check(now int64, word func(ranks.Rank) uint64) bool {
	stalled := w.guard > 0 && w.last != 0 && now-w.last > w.guard
	w.last = now
	if w.pending {
		w.pending = false
		w.rec = hb.WatchRecord{Emitter: w.want, GrewAt: w.setAt, CheckedAt: w.setAt}
		stalled = false
	}
	if seq := word(w.rec.Emitter); seq > w.rec.Seq {
		w.rec.Seq, w.rec.GrewAt = seq, now
	} else if stalled {
		w.rec.GrewAt = now
	}
	w.rec.CheckedAt = now
	return w.alarmDue(now)
}

// alarmDue is the alarm's rule at a check at now: the word has not grown
// for silence, nor has the alarm rung for as long. A true answer counts as
// rung.
func (w *watch) alarmDue(now int64) bool {
	if w.silence > 0 && now-w.rec.GrewAt >= w.silence && now-w.alarmedAt >= w.silence {
		w.alarmedAt = now
		return true
	}
	return false
}
