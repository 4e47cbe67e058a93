package verbs

/*
#cgo nocallback vv_ring_poll
#cgo nocallback vv_ring_recover
#include <stdlib.h>
#include "vverbs.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// GRHSize is the space a UD receive buffer reserves for the Global Routing
// Header in front of the message.
const GRHSize = 40

// RecvRing keeps a QP's receive queue full: n buffers of size bytes in one
// registered mmap'ed region, all posted at creation. Poll hands completed
// buffers to a callback and reposts them at the start of the next Poll, all
// in one cgo call per batch. The ring's CQ (the QP's receive CQ) carries
// only this ring's completions.
type RecvRing struct {
	qp      *QP
	cq      *CQ
	mr      *MR
	st      *C.struct_vv_ring
	n, size int
	grh     int
	wc      WC
}

// NewRecvRing allocates and registers n buffers of size bytes (plus the GRH
// for UD) and posts them all to q's receive queue.
func (q *QP) NewRecvRing(n, size int) (*RecvRing, error) {
	if q.qp == nil {
		return nil, ErrClosed
	}
	if n <= 0 || n > q.recvWR {
		return nil, fmt.Errorf("verbs: NewRecvRing: %d buffers for a receive queue of %d", n, q.recvWR)
	}
	if err := q.recvCQ.claim("RecvRing"); err != nil {
		return nil, err
	}
	grh := 0
	if q.typ == UD {
		grh = GRHSize
	}
	slot := (size + grh + 63) &^ 63 // cache-line aligned buffers
	m, err := Mmap(n * slot)
	if err != nil {
		return nil, err
	}
	// The ring owns its MR: it is not tracked on its own, the ring is.
	mr := &MR{pd: q.pd, buf: m.buf[:n*slot], own: m}
	cmr, err := C.ibv_reg_mr(q.pd.pd, unsafe.Pointer(&m.buf[0]), C.size_t(n*slot), C.IBV_ACCESS_LOCAL_WRITE)
	if cmr == nil {
		m.Close()
		return nil, newError(fmt.Sprintf("ibv_reg_mr(%d bytes, recv ring)", n*slot), errnoOf(err))
	}
	mr.mr, mr.lkey, mr.rkey = cmr, uint32(cmr.lkey), uint32(cmr.rkey)
	var en C.int
	st := C.vv_ring_new(q.qp, q.recvCQ.cq, C.uint64_t(mr.Addr()), C.uint32_t(n), C.uint32_t(slot),
		C.uint32_t(mr.lkey), &en)
	if st == nil {
		mr.destroy()
		return nil, newError("ibv_post_recv(ring)", int(en))
	}
	if q.typ == UD && q.sendCQ != q.recvCQ {
		st.ud, st.port, st.qkey, st.psn = 1, C.int(q.port), C.uint32_t(q.qkey), C.uint32_t(q.psn)
	}
	r := &RecvRing{qp: q, cq: q.recvCQ, mr: mr, st: st, n: n, size: slot, grh: grh}
	if err := q.pd.c.track(r); err != nil {
		r.destroy()
		return nil, err
	}
	return r, nil
}

// Poll reposts the buffers the previous Poll handed out, then reaps up to
// 16 receive completions and calls fn for each: msg is the payload (GRH
// stripped for UD) in the ring's registered memory, valid only until the
// next Poll; for a failed completion msg is nil and wc.Err() says why. fn
// must not call Poll. It returns the number of completions. When it had
// to recover the QP (see RecvRing) and could not, it returns the error
// without calling fn.
func (r *RecvRing) Poll(fn func(wc *WC, msg []byte)) (int, error) {
	if r.st == nil {
		return 0, ErrClosed
	}
	n, err := C.vv_ring_poll(r.st)
	return r.deliver(fn, n, err)
}

// deliver handles the result n of a vv_ring_poll call.
func (r *RecvRing) deliver(fn func(wc *WC, msg []byte), n C.int, err error) (int, error) {
	if n <= C.VV_EREPOST {
		return 0, newError("ibv_post_recv(ring repost)", int(C.VV_EREPOST-n))
	}
	if n == C.VV_ERECOVER {
		return 0, r.recoverErr()
	}
	if n < 0 {
		return 0, newError("ibv_poll_cq(recv ring)", errnoOf(err))
	}
	for i := 0; i < int(n); i++ {
		r.wc = wcFromC(&r.st.wc[i])
		var msg []byte
		if r.wc.Status == WCSuccess && r.wc.WRID < uint64(r.n) {
			off := int(r.wc.WRID) * r.size
			l := int(r.wc.ByteLen)
			if l > r.size {
				l = r.size
			}
			msg = r.mr.buf[off+r.grh : off+l : off+l]
		}
		fn(&r.wc, msg)
	}
	return int(n), nil
}

// Reposted returns how many buffers the ring has reposted so far.
func (r *RecvRing) Reposted() uint64 { return uint64(r.st.reposted) }

// Errors returns the error completions other than flushes, by status,
// since the ring was created (their buffers were reposted).
func (r *RecvRing) Errors() map[WCStatus]uint64 {
	m := map[WCStatus]uint64{}
	for s, k := range r.st.errs {
		if k > 0 {
			m[WCStatus(s)] = uint64(k)
		}
	}
	return m
}

// Flushed returns how many completions were flushes (the QP was in the
// error state), including those a recovery dropped.
func (r *RecvRing) Flushed() uint64 { return uint64(r.st.flushed) }

// Recoveries returns how many times the ring brought its UD QP back from
// the error state.
func (r *RecvRing) Recoveries() uint64 { return uint64(r.st.recoveries) }

// Recover brings the ring's UD QP back to RTS from any state (RESET, INIT,
// RTR, RTS with its port, Q_Key and PSN) and reposts every buffer, as Poll
// does by itself after an error completion that left the QP in the error
// state; use it when the QP failed without one (an asynchronous QP event,
// a flushed send). Sends not completed yet are discarded, some without a
// completion. Do not call it concurrently with Poll.
func (r *RecvRing) Recover() error {
	if r.st == nil {
		return ErrClosed
	}
	if r.st.ud == 0 {
		return fmt.Errorf("verbs: RecvRing.Recover: a %v QP, or one sharing its send and receive CQ", r.qp.typ)
	}
	if C.vv_ring_recover(r.st) != 0 {
		return r.recoverErr()
	}
	return nil
}

func (r *RecvRing) recoverErr() error {
	return newError("recovering the UD QP: "+C.GoString(r.st.recover_op), int(r.st.recover_err))
}

// Close frees the ring's state and deregisters and unmaps its buffers. Close
// or reset the QP first: buffers still posted belong to the device.
func (r *RecvRing) Close() error { return r.qp.pd.c.release(r) }

func (r *RecvRing) destroy() error {
	if r.st != nil {
		C.vv_ring_free(r.st)
		r.st = nil
	}
	if r.mr != nil && r.mr.mr != nil {
		if err := r.mr.destroy(); err != nil {
			return err
		}
	}
	return nil
}
