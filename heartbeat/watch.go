package heartbeat

// #include <stdlib.h>
// #include "native.h"
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// Watch is the observer's check as the heartbeat thread runs it: every few
// periods the thread calls Check, which loads the slot word of the emitter
// under watch and records when that word last grew. The event loop reads
// the record (Record) only when SUSP-TIMEOUT may have expired and hands it
// to hb.Ring.Observe, so checking often costs the loop no wake-up; with an
// alarm (SetAlarm) at a silence no longer than δ, the checks tell the loop
// when that may be, and a loop whose emitter is heard sleeps.
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
// Check carries out. The state lives in C memory and the check is C
// (native.c), so that the native heartbeat thread runs the same check
// without entering Go.
type Watch struct {
	slots *transport.Slots // kept alive for the words the checks load
	c     *C.vg_watch      // C memory: the native thread reads it too
	alarm func()
}

// NewWatch returns a Watch over slots with the given stall guard
// (nanoseconds; 0 disables it). It watches nothing until Set.
func NewWatch(slots *transport.Slots, stallGuard int64) *Watch {
	c := (*C.vg_watch)(C.calloc(1, C.sizeof_vg_watch))
	c.guard = C.int64_t(stallGuard)
	c.rec_emitter, c.emitter = C.VG_NO_TARGET, C.VG_NO_TARGET
	if slots.Len() > 0 {
		c.words, c.nwords = (*C.uint64_t)(unsafe.Pointer(slots.Word(0))), C.uint32_t(slots.Len())
	}
	w := &Watch{slots: slots, c: c}
	runtime.AddCleanup(w, func(c *C.vg_watch) { C.free(unsafe.Pointer(c)) }, c)
	return w
}

// SetAlarm makes the checks call alarm when the watched word has not grown
// for silence (nanoseconds), and again every silence while it stays so:
// the event loop then needs no wake-up of its own to act on a silence
// (block mending's early probes, SUSP-TIMEOUT's expiry). The first alarm
// of a silence comes at the first check that finds it, with the record of
// that check published before. alarm runs on the Go
// heartbeat thread, or on a goroutine the native thread signals, and must
// not block. Call it before the checks start.
func (w *Watch) SetAlarm(silence int64, alarm func()) {
	w.c.silence, w.alarm = C.int64_t(silence), alarm
}

// Set asks the checks to watch emitter from now on: from the next check,
// the record is about emitter, with SUSP-TIMEOUT running from now and its
// word counting as grown once it is above zero (as hb.Ring's check after
// a change of emitter). Until then Record still describes the previous
// emitter, which hb.Ring.Observe ignores. One goroutine calls Set.
func (w *Watch) Set(emitter ranks.Rank, now int64) {
	want := (*uint64)(unsafe.Pointer(&w.c.want))
	gen := atomic.LoadUint64(want)>>32 + 1
	atomic.StoreInt64((*int64)(unsafe.Pointer(&w.c.set_at)), now)
	atomic.StoreUint64(want, gen<<32|uint64(emitter))
	runtime.KeepAlive(w) // its cleanup frees the C state
}

// watching returns the emitter Set asked for last; false before any Set
// or for none.
func (w *Watch) watching() (ranks.Rank, bool) {
	want := atomic.LoadUint64((*uint64)(unsafe.Pointer(&w.c.want)))
	return ranks.Rank(uint32(want)), want>>32 != 0 && uint32(want) != noTarget
}

// Check is one check at now: one load of the watched word. One thread
// calls Check; it never blocks.
func (w *Watch) Check(now int64) {
	if C.vg_watch_check(w.c, C.int64_t(now)) != 0 && w.alarm != nil {
		w.alarm()
	}
	runtime.KeepAlive(w)
}

// Record returns what the checks saw. It never blocks for long: it retries
// while a check is writing.
func (w *Watch) Record() hb.WatchRecord {
	ver := (*uint64)(unsafe.Pointer(&w.c.ver))
	for {
		v := atomic.LoadUint64(ver)
		if v&1 != 0 {
			runtime.Gosched()
			continue
		}
		r := hb.WatchRecord{Emitter: ranks.Rank(atomic.LoadUint32((*uint32)(unsafe.Pointer(&w.c.emitter)))),
			Seq:       atomic.LoadUint64((*uint64)(unsafe.Pointer(&w.c.seq))),
			GrewAt:    atomic.LoadInt64((*int64)(unsafe.Pointer(&w.c.grew_at))),
			CheckedAt: atomic.LoadInt64((*int64)(unsafe.Pointer(&w.c.checked_at)))}
		if atomic.LoadUint64(ver) == v {
			runtime.KeepAlive(w)
			return r
		}
	}
}
