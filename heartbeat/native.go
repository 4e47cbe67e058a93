package heartbeat

// #cgo CFLAGS: -O2 -Wall
// #cgo LDFLAGS: -lpthread
// #include <stdlib.h>
// #include "native.h"
import "C"

import (
	"fmt"
	"runtime/cgo"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/vigil-hpc/vigil/ranks"
)

// WordFunc resolves where a heartbeat to rank to is one store: the word of
// this rank in to's slot array, mapped into this process (shared memory,
// or any memory the observer reads), or nil when to is reached only
// through the SendFunc. The word must stay mapped while the Emitter runs.
type WordFunc func(to ranks.Rank) *uint64

// native is the state of an Emitter whose thread runs in C (native.c): a
// pthread the Go runtime never schedules, which sleeps on absolute
// deadlines (ppoll on the eventfd), stores each heartbeat into the
// observer's word, and runs the Watch's check in C every CheckEvery
// periods. It enters Go only for a target without a word (SendFunc), for
// heartbeats waiting in DrainFD, and for the Watch's alarm: in a quiet job
// with every observer's word mapped, never.
type native struct {
	c      *C.vg_emitter // C memory
	handle cgo.Handle
}

func (e *Emitter) startNative() error {
	c := (*C.vg_emitter)(C.calloc(1, C.sizeof_vg_emitter))
	c.period = C.int64_t(e.cfg.Period)
	c.efd = C.int(e.efd)
	c.cpu = C.int(e.cfg.CPU)
	if e.cfg.RealTime {
		c.priority = C.int(max(1, e.cfg.Priority))
	}
	c.check_every = C.int(e.cfg.CheckEvery)
	if e.cfg.Watch != nil {
		c.watch = e.cfg.Watch.c
	}
	switch {
	case e.cfg.Drain == nil:
		c.drain_fd = -1
	case e.cfg.DrainFD > 0:
		c.drain_fd = C.int(e.cfg.DrainFD)
	default:
		c.drain_fd = C.VG_DRAIN_ALWAYS
	}
	c.target = C.uint32_t(e.target.Load())
	e.nat = &native{c: c, handle: cgo.NewHandle(e)} // the handle keeps e, its Watch and Slots alive
	c.handle = C.uintptr_t(e.nat.handle)
	if rc := C.vg_emitter_start(c); rc != 0 {
		e.nat.handle.Delete()
		C.free(unsafe.Pointer(c))
		e.nat = nil
		return fmt.Errorf("heartbeat: pthread_create: %w", syscall.Errno(rc))
	}
	return nil
}

// setTarget publishes the target to the native thread.
func (n *native) setTarget(to uint32) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&n.c.target)), to)
}

// join stops the thread and waits for it.
func (n *native) join() { C.vg_emitter_stop(n.c) }

// free releases the stopped thread's memory and handle.
func (n *native) free() {
	n.handle.Delete()
	C.free(unsafe.Pointer(n.c))
}

func (n *native) stats() EmitterStats {
	c := n.c
	return EmitterStats{
		Sent:      atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.sent))),
		Errors:    atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.errs))),
		Missed:    atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.missed))),
		MaxLateNs: atomic.LoadInt64((*int64)(unsafe.Pointer(&c.max_late))),
		Checks:    atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.checks))),
		Pinned:    atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.pinned))) != 0,
		RealTime:  atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.rt))) != 0,
		Native:    true,
	}
}

// vigilHeartbeatSend sends one heartbeat through the SendFunc for the
// native thread and returns the target's word if it now has one.
//
//export vigilHeartbeatSend
func vigilHeartbeatSend(h C.uintptr_t, to C.uint32_t, seq C.uint64_t, failed *C.int) unsafe.Pointer {
	e := cgo.Handle(h).Value().(*Emitter)
	if e.cfg.Send(ranks.Rank(to), uint64(seq)) != nil {
		*failed = 1
	}
	if w := e.cfg.Word(ranks.Rank(to)); w != nil {
		return unsafe.Pointer(w)
	}
	return nil
}

// vigilHeartbeatDrain runs the Drain function for the native thread.
//
//export vigilHeartbeatDrain
func vigilHeartbeatDrain(h C.uintptr_t) {
	if d := cgo.Handle(h).Value().(*Emitter).cfg.Drain; d != nil {
		d()
	}
}

// vigilHeartbeatAlarm runs the Watch's alarm for the native thread.
//
//export vigilHeartbeatAlarm
func vigilHeartbeatAlarm(h C.uintptr_t) {
	if w := cgo.Handle(h).Value().(*Emitter).cfg.Watch; w != nil && w.alarm != nil {
		w.alarm()
	}
}
