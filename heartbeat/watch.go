package heartbeat

import (
	"runtime"
	"sync/atomic"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// Watch is the observer's check as the heartbeat thread runs it: every few
// periods the thread calls Check, which loads the slot word of the emitter
// under watch and records when that word last grew. The event loop reads
// the record (Record) only when SUSP-TIMEOUT may have expired and hands it
// to hb.Ring.Observe, so checking often costs the loop no wake-up: it wakes
// about once per δ.
//
// The stall guard lives here: a check that comes more than StallGuard after
// the previous one means the thread itself was stalled (descheduled,
// paused), so the word may not show heartbeats that arrived meanwhile; that
// check re-arms SUSP-TIMEOUT (GrewAt ← now) instead of letting it expire.
//
// Check never blocks: the heartbeat thread may run SCHED_FIFO, and a lock
// shared with a starved normal-priority goroutine would make it wait on
// that goroutine (priority inversion). The record is published with a
// sequence lock (one writer: the thread), and Set is a request the next
// Check carries out.
type Watch struct {
	slots *transport.Slots
	guard int64

	// Set's request: generation<<32 | emitter, and when it was made.
	want  atomic.Uint64
	setAt atomic.Int64

	// The record, written by Check only: ver is odd while it writes.
	ver                     atomic.Uint64
	emitter                 atomic.Uint32
	seq                     atomic.Uint64
	grewAt, checkedAt       atomic.Int64
	applied                 uint64 // the request the record follows (thread only)
	last                    int64  // time of the previous Check (thread only)
	recSeq                  uint64 // thread-only copies of the record
	recGrewAt, recCheckedAt int64
	recEmitter              ranks.Rank

	// The silence alarm (SetAlarm): set before the checks start.
	silence   int64
	alarm     func()
	alarmedAt int64 // thread only
}

// NewWatch returns a Watch over slots with the given stall guard
// (nanoseconds; 0 disables it). It watches nothing until Set.
func NewWatch(slots *transport.Slots, stallGuard int64) *Watch {
	w := &Watch{slots: slots, guard: stallGuard, recEmitter: noEmitter}
	w.emitter.Store(uint32(noEmitter))
	return w
}

const noEmitter = ranks.Rank(^uint32(0))

// SetAlarm makes the checks call alarm when the watched word has not grown
// for silence (nanoseconds), and again every silence while it stays so:
// the event loop then needs no wake-up of its own to act on a silence
// shorter than δ (block mending's early probes). alarm runs on the
// heartbeat thread and must not block. Call it before the checks start.
func (w *Watch) SetAlarm(silence int64, alarm func()) { w.silence, w.alarm = silence, alarm }

// Set asks the checks to watch emitter from now on: from the next check,
// the record is about emitter, with SUSP-TIMEOUT running from now and its
// word counting as grown once it is above zero (as hb.Ring's check after
// a change of emitter). Until then Record still describes the previous
// emitter, which hb.Ring.Observe ignores. One goroutine calls Set.
func (w *Watch) Set(emitter ranks.Rank, now int64) {
	gen := w.want.Load()>>32 + 1
	w.setAt.Store(now)
	w.want.Store(gen<<32 | uint64(emitter))
}

// Check is one check at now: one load of the watched word. One thread
// calls Check; it never blocks.
func (w *Watch) Check(now int64) {
	stalled := w.guard > 0 && w.last != 0 && now-w.last > w.guard
	w.last = now
	if want := w.want.Load(); want != w.applied {
		w.applied = want
		at := w.setAt.Load()
		w.recEmitter, w.recSeq, w.recGrewAt, w.recCheckedAt = ranks.Rank(want), 0, at, at
		stalled = false
	}
	if w.recEmitter == noEmitter {
		return
	}
	if seq := w.slots.Load(w.recEmitter); seq > w.recSeq {
		w.recSeq, w.recGrewAt = seq, now
	} else if stalled {
		w.recGrewAt = now
	}
	w.recCheckedAt = now
	w.ver.Add(1)
	w.emitter.Store(uint32(w.recEmitter))
	w.seq.Store(w.recSeq)
	w.grewAt.Store(w.recGrewAt)
	w.checkedAt.Store(w.recCheckedAt)
	w.ver.Add(1)
	if w.alarm != nil && now-w.recGrewAt >= w.silence && now-w.alarmedAt >= w.silence {
		w.alarmedAt = now // after the record: the alarmed loop reads this check
		w.alarm()
	}
}

// Record returns what the checks saw. It never blocks for long: it retries
// while a check is writing.
func (w *Watch) Record() hb.WatchRecord {
	for {
		v := w.ver.Load()
		if v&1 != 0 {
			runtime.Gosched()
			continue
		}
		r := hb.WatchRecord{Emitter: ranks.Rank(w.emitter.Load()), Seq: w.seq.Load(),
			GrewAt: w.grewAt.Load(), CheckedAt: w.checkedAt.Load()}
		if w.ver.Load() == v {
			return r
		}
	}
}
