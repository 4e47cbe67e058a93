package verbs

/*
#include <stdlib.h>
#include "vverbs.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"time"
	"unsafe"
)

// CQ is a completion queue (ibv_cq), optionally with its own completion
// channel for blocking waits.
type CQ struct {
	c    *Context
	cq   *C.struct_ibv_cq
	ch   *C.struct_ibv_comp_channel
	size int
	wc   *[C.VV_BATCH]C.struct_vv_wc // C scratch for Poll
	// role is set when a Writer or a RecvRing takes the CQ over: their C
	// helpers read every completion of it (a Writer's wr_id is its state's
	// address), so nothing else may post to or poll it.
	role string
}

// claim reserves the CQ for role ("Writer" or "RecvRing").
func (q *CQ) claim(role string) error {
	if q.role != "" && q.role != role {
		return fmt.Errorf("verbs: CQ already serves a %s, cannot serve a %s", q.role, role)
	}
	q.role = role
	return nil
}

// free reports an error if a Writer or RecvRing owns the CQ.
func (q *CQ) free(op string) error {
	if q.role != "" {
		return fmt.Errorf("verbs: %s: the CQ serves a %s and takes no other completions", op, q.role)
	}
	return nil
}

// CreateCQ creates a completion queue of at least n entries
// (ibv_create_cq); with withChannel it gets a completion channel
// (ibv_create_comp_channel) so Wait can block for completions.
func (c *Context) CreateCQ(n int, withChannel bool) (*CQ, error) {
	if c.ctx == nil {
		return nil, ErrClosed
	}
	q := &CQ{c: c}
	if withChannel {
		ch, err := C.ibv_create_comp_channel(c.ctx)
		if ch == nil {
			return nil, newError("ibv_create_comp_channel", errnoOf(err))
		}
		if rc := C.vv_set_nonblock(ch.fd); rc != 0 {
			C.ibv_destroy_comp_channel(ch)
			return nil, newError("fcntl(comp_channel, O_NONBLOCK)", int(rc))
		}
		q.ch = ch
	}
	cq, err := C.ibv_create_cq(c.ctx, C.int(n), nil, q.ch, 0)
	if cq == nil {
		if q.ch != nil {
			C.ibv_destroy_comp_channel(q.ch)
		}
		return nil, newError("ibv_create_cq", errnoOf(err))
	}
	q.cq = cq
	q.size = int(cq.cqe)
	q.wc = (*[C.VV_BATCH]C.struct_vv_wc)(C.calloc(C.VV_BATCH, C.size_t(unsafe.Sizeof(C.struct_vv_wc{}))))
	if err := c.track(q); err != nil {
		q.destroy()
		return nil, err
	}
	return q, nil
}

// Size returns the number of entries the device granted.
func (q *CQ) Size() int { return q.size }

// Close destroys the CQ (ibv_destroy_cq) and its channel; it fails with
// EBUSY while a QP uses the CQ.
func (q *CQ) Close() error { return q.c.release(q) }

func (q *CQ) destroy() error {
	if q.cq != nil {
		if rc := C.ibv_destroy_cq(q.cq); rc != 0 {
			return newError("ibv_destroy_cq", int(rc))
		}
		q.cq = nil
	}
	if q.ch != nil {
		if rc := C.ibv_destroy_comp_channel(q.ch); rc != 0 {
			return newError("ibv_destroy_comp_channel", int(rc))
		}
		q.ch = nil
	}
	if q.wc != nil {
		C.free(unsafe.Pointer(q.wc))
		q.wc = nil
	}
	return nil
}

// WCOpcode is an ibv_wc_opcode: what a completed work request did.
type WCOpcode int

// Completion opcodes.
const (
	WCSend      WCOpcode = C.IBV_WC_SEND
	WCRDMAWrite WCOpcode = C.IBV_WC_RDMA_WRITE
	WCRDMARead  WCOpcode = C.IBV_WC_RDMA_READ
	WCRecv      WCOpcode = C.IBV_WC_RECV
	WCRecvImm   WCOpcode = C.IBV_WC_RECV_RDMA_WITH_IMM
)

// WC is one work completion.
type WC struct {
	WRID      uint64   // the work request's wr_id
	Status    WCStatus // WCSuccess or why it failed
	Opcode    WCOpcode // what completed (valid only on success for sends)
	VendorErr uint32   // device-specific error detail
	ByteLen   uint32   // bytes received (receives; UD includes the GRH)
	QPNum     uint32   // the local QP
	SrcQP     uint32   // UD receives: the sender's QP number
	Flags     int      // ibv_wc_flags (GRH present, immediate data)
}

// Err returns nil for a successful completion, else a *WCError.
func (w *WC) Err() error {
	if w.Status == WCSuccess {
		return nil
	}
	op := "work request"
	switch w.Opcode {
	case WCSend:
		op = "SEND"
	case WCRDMAWrite:
		op = "RDMA WRITE"
	case WCRDMARead:
		op = "RDMA READ"
	case WCRecv, WCRecvImm:
		op = "RECV"
	}
	return &WCError{Op: op, Status: w.Status, VendorErr: w.VendorErr}
}

func wcFromC(w *C.struct_vv_wc) WC {
	return WC{
		WRID: uint64(w.wr_id), Status: WCStatus(w.status), Opcode: WCOpcode(w.opcode),
		VendorErr: uint32(w.vendor_err), ByteLen: uint32(w.byte_len), QPNum: uint32(w.qp_num),
		SrcQP: uint32(w.src_qp), Flags: int(w.wc_flags),
	}
}

// Poll reaps up to len(wcs) completions (at most 16 per call, ibv_poll_cq)
// without blocking and returns how many it stored.
func (q *CQ) Poll(wcs []WC) (int, error) {
	if q.cq == nil {
		return 0, ErrClosed
	}
	if err := q.free("CQ.Poll"); err != nil {
		return 0, err
	}
	max := len(wcs)
	if max > C.VV_BATCH {
		max = C.VV_BATCH
	}
	n, err := C.vv_poll(q.cq, &q.wc[0], C.int(max))
	if n < 0 {
		return 0, newError("ibv_poll_cq", errnoOf(err))
	}
	for i := 0; i < int(n); i++ {
		wcs[i] = wcFromC(&q.wc[i])
	}
	return int(n), nil
}

// Arm requests a completion event for the next completion
// (ibv_req_notify_cq); with solicitedOnly, only for solicited ones.
func (q *CQ) Arm(solicitedOnly bool) error {
	if q.cq == nil {
		return ErrClosed
	}
	s := 0
	if solicitedOnly {
		s = 1
	}
	if rc := C.vv_req_notify(q.cq, C.int(s)); rc != 0 {
		return newError("ibv_req_notify_cq", int(rc))
	}
	return nil
}

// Wait blocks up to timeout (negative: forever) for a completion event on
// the CQ's channel, reads and acknowledges it (ibv_get_cq_event,
// ibv_ack_cq_events). The CQ must have been armed. The usual loop is: Poll
// until empty, Arm, Poll once more (a completion may have slipped in), then
// Wait.
func (q *CQ) Wait(timeout time.Duration) (bool, error) {
	if q.cq == nil {
		return false, ErrClosed
	}
	if q.ch == nil {
		return false, &Error{Op: "CQ.Wait (CQ created without a completion channel)", Errno: syscall.EINVAL}
	}
	for {
		ready, err := pollIn(int(q.ch.fd), timeout)
		if err != nil || !ready {
			return false, err
		}
		rc := C.vv_get_cq_event(q.ch, q.cq)
		switch syscall.Errno(rc) {
		case 0:
			return true, nil
		case syscall.EAGAIN:
			continue
		}
		return false, newError("ibv_get_cq_event", int(rc))
	}
}

// ChannelFD returns the file descriptor of the CQ's completion channel
// (non-blocking; -1 without a channel), for a caller that waits on it
// together with other descriptors (poll(2), epoll) and then reads the
// event with TryEvent.
func (q *CQ) ChannelFD() int {
	if q.ch == nil {
		return -1
	}
	return int(q.ch.fd)
}

// TryEvent reads and acknowledges one pending completion event of the CQ's
// channel without waiting; ok is false if none is pending.
func (q *CQ) TryEvent() (ok bool, err error) {
	if q.cq == nil {
		return false, ErrClosed
	}
	if q.ch == nil {
		return false, &Error{Op: "CQ.TryEvent (CQ created without a completion channel)", Errno: syscall.EINVAL}
	}
	switch rc := C.vv_get_cq_event(q.ch, q.cq); syscall.Errno(rc) {
	case 0:
		return true, nil
	case syscall.EAGAIN:
		return false, nil
	default:
		return false, newError("ibv_get_cq_event", int(rc))
	}
}
