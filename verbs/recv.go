package verbs

/*
#cgo nocallback vv_ring_poll
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
// must not call Poll. It returns the number of completions.
func (r *RecvRing) Poll(fn func(wc *WC, msg []byte)) (int, error) {
	if r.st == nil {
		return 0, ErrClosed
	}
	n, err := C.vv_ring_poll(r.st)
	if n <= C.VV_EREPOST {
		return 0, newError("ibv_post_recv(ring repost)", int(C.VV_EREPOST-n))
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
