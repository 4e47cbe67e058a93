package hb

import (
	"sync"

	"github.com/vigil-hpc/vigil/ranks"
)

// Watch is the observer's check as the heartbeat thread runs it: every few
// periods the thread calls Check, which loads the slot word of the emitter
// under watch and records when that word last grew. The event loop reads
// the record (Record) only when SUSP-TIMEOUT may have expired and hands it
// to Ring.Observe, so checking often costs the loop no wake-up: it wakes
// about once per δ.
//
// The stall guard lives here: a check that comes more than StallGuard after
// the previous one means the thread itself was stalled (descheduled,
// paused), so the word may not show heartbeats that arrived meanwhile; that
// check re-arms SUSP-TIMEOUT (GrewAt ← now) instead of letting it expire.
type Watch struct {
	slots *Slots
	guard int64

	mu   sync.Mutex
	rec  WatchRecord
	last int64 // time of the previous Check
}

// WatchRecord is what the checks saw of one emitter.
type WatchRecord struct {
	// Emitter is the rank under watch.
	Emitter ranks.Rank
	// Seq is the largest value of its slot word seen by a check since Set.
	Seq uint64
	// GrewAt is when a check first saw Seq, or re-armed after a stall:
	// SUSP-TIMEOUT runs from then.
	GrewAt int64
	// CheckedAt is when the last check ran.
	CheckedAt int64
}

// NewWatch returns a Watch over slots with the given stall guard
// (nanoseconds; 0 disables it). It watches nothing until Set.
func NewWatch(slots *Slots, stallGuard int64) *Watch {
	return &Watch{slots: slots, guard: stallGuard, rec: WatchRecord{Emitter: noEmitter}}
}

const noEmitter = ranks.Rank(^uint32(0))

// Set starts watching emitter at now: its word counts as grown once it is
// above zero, as Ring's check after a change of emitter.
func (w *Watch) Set(emitter ranks.Rank, now int64) {
	w.mu.Lock()
	w.rec = WatchRecord{Emitter: emitter, GrewAt: now, CheckedAt: now}
	w.mu.Unlock()
}

// Check is one check at now: one load of the watched word.
func (w *Watch) Check(now int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	stalled := w.guard > 0 && w.last != 0 && now-w.last > w.guard
	w.last = now
	if w.rec.Emitter == noEmitter {
		return
	}
	if seq := w.slots.Load(w.rec.Emitter); seq > w.rec.Seq {
		w.rec.Seq, w.rec.GrewAt = seq, now
	} else if stalled {
		w.rec.GrewAt = now
	}
	w.rec.CheckedAt = now
}

// Record returns what the checks saw since the last Set.
func (w *Watch) Record() WatchRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rec
}
