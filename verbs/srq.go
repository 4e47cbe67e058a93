package verbs

/*
#include "vverbs.h"
*/
import "C"

import "fmt"

// SRQ is a shared receive queue (ibv_srq): the receives of every RC QP
// created with it (QPConfig.SRQ) are taken from it, so that many QPs share
// one pool of registered buffers. Completions of its receives go to each
// QP's receive CQ, WC.QPNum naming the QP. Post from one goroutine at a
// time.
type SRQ struct {
	pd    *PD
	srq   *C.struct_ibv_srq
	maxWR int
}

// CreateSRQ creates a shared receive queue of up to maxWR posted receives.
func (p *PD) CreateSRQ(maxWR int) (*SRQ, error) {
	if p.pd == nil {
		return nil, ErrClosed
	}
	if maxWR <= 0 {
		return nil, fmt.Errorf("verbs: CreateSRQ: maxWR %d, want > 0", maxWR)
	}
	var en C.int
	srq := C.vv_create_srq(p.pd, C.int(maxWR), &en)
	if srq == nil {
		return nil, newError("ibv_create_srq", int(en))
	}
	s := &SRQ{pd: p, srq: srq, maxWR: maxWR}
	if err := p.c.track(s); err != nil {
		s.destroy()
		return nil, err
	}
	return s, nil
}

// MaxWR returns the number of receives the SRQ was created for.
func (s *SRQ) MaxWR() int { return s.maxWR }

// PostRecv posts one receive of up to length bytes at offset off of local.
func (s *SRQ) PostRecv(wrID uint64, local *MR, off, length int) error {
	if s.srq == nil {
		return ErrClosed
	}
	if off < 0 || length <= 0 || off+length > local.Len() {
		return fmt.Errorf("verbs: SRQ.PostRecv range [%d,%d) outside the %d-byte MR", off, off+length, local.Len())
	}
	if rc := C.vv_post_srq_recv(s.srq, C.uint64_t(wrID), C.uint64_t(local.Addr()+uint64(off)),
		C.uint32_t(length), C.uint32_t(local.lkey)); rc != 0 {
		return newError("ibv_post_srq_recv", int(rc))
	}
	return nil
}

// Close destroys the SRQ (ibv_destroy_srq); destroy its QPs first.
func (s *SRQ) Close() error { return s.pd.c.release(s) }

func (s *SRQ) destroy() error {
	if s.srq != nil {
		if rc := C.ibv_destroy_srq(s.srq); rc != 0 {
			return newError("ibv_destroy_srq", int(rc))
		}
		s.srq = nil
	}
	return nil
}
