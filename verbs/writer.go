package verbs

/*
#cgo noescape vv_hbw_write
#cgo nocallback vv_hbw_write
#cgo nocallback vv_hbw_sync
#include <stdlib.h>
#include "vverbs.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Writer writes 64-bit words (heartbeat sequence numbers) into a peer's
// registered memory with inline RDMA WRITEs over a connected RC QP. One
// Write is one cgo call: it posts the WR (every Nth one signalled), makes
// room in the send queue when it is full, and reaps ready completions while
// a signalled WR is outstanding. It does not allocate.
//
// The QP's send CQ is reserved for Writers (they may share it, each wr_id
// names its writer); a Writer is used from one goroutine (or pinned thread)
// at a time.
type Writer struct {
	qp  *QP
	st  *C.struct_vv_hbw
	err error // sticky once a completion failed
}

// WriterStats are a Writer's counters.
type WriterStats struct {
	Posted    uint64 // WRs posted (Sync's fences included)
	Retired   uint64 // WRs known complete
	Errors    uint64 // completions with an error status
	Polls     uint64 // ibv_poll_cq calls
	FullWaits uint64 // times the send queue was full
}

// NewWriter returns a Writer on the RC QP q that signals every signalEvery
// posts (0: a quarter of the send queue, at most 32). signalEvery must not
// exceed the send queue depth.
func (q *QP) NewWriter(signalEvery int) (*Writer, error) {
	if q.qp == nil {
		return nil, ErrClosed
	}
	if q.typ != RC {
		return nil, fmt.Errorf("verbs: NewWriter on a %v QP", q.typ)
	}
	if q.inline < 8 {
		return nil, fmt.Errorf("verbs: NewWriter: QP inline limit %d < 8 bytes", q.inline)
	}
	depth := q.sendWR
	if signalEvery <= 0 {
		signalEvery = min(32, max(1, depth/4))
	}
	if signalEvery > depth {
		return nil, fmt.Errorf("verbs: NewWriter: signalEvery %d exceeds send queue depth %d", signalEvery, depth)
	}
	if err := q.sendCQ.claim("Writer"); err != nil {
		return nil, err
	}
	st := C.vv_hbw_new(q.qp, q.sendCQ.cq, C.uint32_t(depth), C.uint32_t(signalEvery))
	if st == nil {
		return nil, newError("calloc(writer state)", 12) // ENOMEM
	}
	w := &Writer{qp: q, st: st}
	if err := q.pd.c.track(w); err != nil {
		C.vv_hbw_free(st)
		return nil, err
	}
	return w, nil
}

// Write makes v visible at to (an 8-byte word of a peer's region). It
// returns nil once the WR is posted; a failure of an earlier WR shows here
// (and stays: the QP is then in error) as a *WCError, a full send queue as
// ErrQueueFull.
func (w *Writer) Write(to RemoteAddr, v uint64) error {
	if w.st == nil {
		return ErrClosed
	}
	rc := C.vv_hbw_write(w.st, C.uint64_t(to.Addr), C.uint32_t(to.RKey), C.uint64_t(v))
	if rc == 0 {
		return nil
	}
	return w.fail(rc, "ibv_post_send(RDMA WRITE inline)")
}

func (w *Writer) fail(rc C.int, op string) error {
	switch rc {
	case C.VV_EWC:
		if w.err == nil {
			w.err = &WCError{Op: "RDMA WRITE", Status: WCStatus(w.st.wc_status), VendorErr: uint32(w.st.vendor_err)}
		}
		return w.err
	case C.VV_EFULL:
		return ErrQueueFull
	case C.VV_EPOLL:
		return newError("ibv_poll_cq", int(w.st.poll_errno))
	case C.VV_EFOREIGN:
		return errors.New("verbs: a completion with wr_id 0 on a Writer CQ (CQ shared with other posts?)")
	}
	return newError(op, int(rc))
}

// Sync waits up to timeout until every WR posted so far has completed,
// posting a signalled zero-length RDMA WRITE behind them if the last one was
// unsignalled. It returns the first failed completion as a *WCError.
func (w *Writer) Sync(timeout time.Duration) error {
	if w.st == nil {
		return ErrClosed
	}
	deadline := time.Now().Add(timeout)
	fence := C.int(1)
	for {
		var left C.uint64_t
		rc := C.vv_hbw_sync(w.st, fence, &left)
		fence = 0
		if rc != 0 {
			return w.fail(rc, "ibv_post_send(RDMA WRITE fence)")
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("verbs: Writer.Sync: %d WRs not complete after %v", uint64(left), timeout)
		}
		runtime.Gosched()
	}
}

// SetFullWait bounds how long Write spins for a completion when the send
// queue is full (default 1 s) before returning ErrQueueFull.
func (w *Writer) SetFullWait(d time.Duration) { w.st.spin_ns = C.uint64_t(d.Nanoseconds()) }

// Err returns the sticky completion error, if any.
func (w *Writer) Err() error {
	if w.st.wc_status != 0 && w.err == nil {
		w.fail(C.VV_EWC, "")
	}
	return w.err
}

// Stats returns the writer's counters.
func (w *Writer) Stats() WriterStats {
	return WriterStats{Posted: uint64(w.st.posted), Retired: uint64(w.st.retired), Errors: uint64(w.st.errors),
		Polls: uint64(w.st.polls), FullWaits: uint64(w.st.full_waits)}
}

// SignalEvery returns how often a WR is signalled.
func (w *Writer) SignalEvery() int { return int(w.st.signal_every) }

// Close frees the writer's state (the QP stays).
func (w *Writer) Close() error { return w.qp.pd.c.release(w) }

func (w *Writer) destroy() error {
	C.vv_hbw_free(w.st)
	w.st = nil
	return nil
}
