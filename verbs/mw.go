package verbs

/*
#include <stdlib.h>
#include "vverbs.h"
*/
import "C"

import (
	"fmt"
	"time"
)

// AccessMWBind lets memory windows be bound to a memory region
// (IBV_ACCESS_MW_BIND). A region registered with AccessLocalWrite and
// AccessMWBind but without AccessRemoteWrite is reachable from the network
// only through the windows bound to it.
const AccessMWBind Access = C.IBV_ACCESS_MW_BIND

// MW is a type 2 memory window (ibv_mw): once bound (QP.BindMW), its rkey
// grants remote access to one byte range of a memory region, and only to
// the remote QP connected to the QP it was bound through. The observer
// gives each emitter a window over that emitter's own slot word.
type MW struct {
	pd *PD
	mw *C.struct_ibv_mw
}

// AllocMW allocates a type 2 memory window (ibv_alloc_mw). It fails on a
// device without type 2 windows (DeviceAttr.MemWindowType2).
func (p *PD) AllocMW() (*MW, error) {
	if p.pd == nil {
		return nil, ErrClosed
	}
	mw, err := C.ibv_alloc_mw(p.pd, C.IBV_MW_TYPE_2)
	if mw == nil {
		return nil, newError("ibv_alloc_mw(type 2)", errnoOf(err))
	}
	m := &MW{pd: p, mw: mw}
	if err := p.c.track(m); err != nil {
		C.ibv_dealloc_mw(mw)
		return nil, err
	}
	return m, nil
}

// Close deallocates the window (ibv_dealloc_mw): its rkey grants nothing
// any more.
func (m *MW) Close() error { return m.pd.c.release(m) }

func (m *MW) destroy() error {
	if m.mw == nil {
		return nil
	}
	rc := C.ibv_dealloc_mw(m.mw)
	m.mw = nil
	if rc != 0 {
		return newError("ibv_dealloc_mw", int(rc))
	}
	return nil
}

// BindMW binds window m to length bytes of r at offset off with access
// (AccessRemoteWrite for a heartbeat slot), through q: an RC QP in RTS
// whose send CQ takes no other completions while the bind is in flight
// (not a Writer's). It waits up to timeout for the bind's completion and
// returns the window's new rkey; remote operations carrying it succeed
// only within the range and only from the QP connected to q.
func (q *QP) BindMW(m *MW, r *MR, off, length int, access Access, timeout time.Duration) (uint32, error) {
	if q.qp == nil || m.mw == nil || r.mr == nil {
		return 0, ErrClosed
	}
	if q.typ != RC {
		return 0, fmt.Errorf("verbs: BindMW: a %v QP cannot bind type 2 windows (RC only)", q.typ)
	}
	if off < 0 || length <= 0 || off+length > len(r.buf) {
		return 0, fmt.Errorf("verbs: BindMW: range [%d, %d) outside the %d-byte region", off, off+length, len(r.buf))
	}
	if err := q.sendCQ.free("BindMW"); err != nil {
		return 0, err
	}
	var rkey C.uint32_t
	var status C.int
	var op *C.char
	rc := C.vv_bind_mw(q.qp, q.sendCQ.cq, m.mw, r.mr, C.uint64_t(r.Addr()+uint64(off)), C.uint64_t(length),
		C.int(access), C.uint64_t(bindWRID), C.int(timeout.Milliseconds()), &rkey, &status, &op)
	switch {
	case rc == 0:
		return uint32(rkey), nil
	case rc == C.VV_EWC:
		return 0, &WCError{Op: "BIND_MW", Status: WCStatus(status)}
	}
	return 0, newError(C.GoString(op), int(rc))
}

// bindWRID marks BIND_MW work requests.
const bindWRID = 0xb1d0
