package verbs

/*
#include <stdlib.h>
#include "vverbs.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Access is a set of ibv_access_flags.
type Access int

// Access rights of a memory region or of a QP's remote operations.
const (
	AccessLocalWrite   Access = C.IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = C.IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   Access = C.IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = C.IBV_ACCESS_REMOTE_ATOMIC
)

// Mem is anonymous, page-aligned mmap'ed memory: never Go heap, so a device
// may read and write it and the garbage collector never moves or frees it.
type Mem struct {
	mu  sync.Mutex
	buf []byte
}

// Mmap maps size bytes (rounded up to whole pages) of zeroed anonymous
// memory.
func Mmap(size int) (*Mem, error) {
	if size <= 0 {
		return nil, fmt.Errorf("verbs: Mmap size %d", size)
	}
	pg := unix.Getpagesize()
	n := (size + pg - 1) / pg * pg
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, newError(fmt.Sprintf("mmap(%d)", n), errnoOf(err))
	}
	return &Mem{buf: b}, nil
}

// Bytes returns the whole mapping.
func (m *Mem) Bytes() []byte { return m.buf }

// Addr returns the address of the first byte.
func (m *Mem) Addr() uintptr { return uintptr(unsafe.Pointer(&m.buf[0])) }

// Close unmaps the memory. Deregister every MR over it first.
func (m *Mem) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buf == nil {
		return nil
	}
	if err := unix.Munmap(m.buf); err != nil {
		return newError("munmap", errnoOf(err))
	}
	m.buf = nil
	return nil
}

// MR is a registered memory region (ibv_mr) over mmap'ed memory.
type MR struct {
	pd   *PD
	mr   *C.struct_ibv_mr
	buf  []byte // the registered bytes
	own  *Mem   // unmapped by Close when the MR allocated it
	rkey uint32
	lkey uint32
}

// Register registers length bytes of m starting at offset off with the
// given access rights (ibv_reg_mr). Remote write access needs local write
// too, which Register adds.
func (p *PD) Register(m *Mem, off, length int, access Access) (*MR, error) {
	if m == nil || m.buf == nil {
		return nil, ErrClosed
	}
	if off < 0 || length <= 0 || off+length > len(m.buf) {
		return nil, fmt.Errorf("verbs: Register range [%d,%d) outside the %d-byte mapping", off, off+length, len(m.buf))
	}
	return p.register(m.buf[off:off+length], access, nil)
}

// AllocMR maps size bytes (see Mmap) and registers exactly size bytes of
// them; Close deregisters and unmaps.
func (p *PD) AllocMR(size int, access Access) (*MR, error) {
	m, err := Mmap(size)
	if err != nil {
		return nil, err
	}
	mr, err := p.register(m.buf[:size], access, m)
	if err != nil {
		m.Close()
		return nil, err
	}
	return mr, nil
}

func (p *PD) register(b []byte, access Access, own *Mem) (*MR, error) {
	if p.pd == nil {
		return nil, ErrClosed
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 {
		access |= AccessLocalWrite
	}
	// b is mmap'ed memory, not Go heap: passing its address is allowed.
	mr, err := C.ibv_reg_mr(p.pd, unsafe.Pointer(&b[0]), C.size_t(len(b)), C.int(access))
	if mr == nil {
		return nil, newError(fmt.Sprintf("ibv_reg_mr(%d bytes, access 0x%x)", len(b), int(access)), errnoOf(err))
	}
	r := &MR{pd: p, mr: mr, buf: b, own: own, rkey: uint32(mr.rkey), lkey: uint32(mr.lkey)}
	if err := p.c.track(r); err != nil {
		C.ibv_dereg_mr(mr)
		return nil, err
	}
	return r, nil
}

// Bytes returns the registered bytes.
func (r *MR) Bytes() []byte { return r.buf }

// Sub registers length bytes of r's memory at offset off as a region of
// its own with access (ibv_reg_mr over the same bytes): a narrower view,
// such as one word of a slot array under a memory window. Close it before
// r.
func (r *MR) Sub(off, length int, access Access) (*MR, error) {
	if r.mr == nil {
		return nil, ErrClosed
	}
	if off < 0 || length <= 0 || off+length > len(r.buf) {
		return nil, fmt.Errorf("verbs: Sub range [%d,%d) outside the %d-byte region", off, off+length, len(r.buf))
	}
	return r.pd.register(r.buf[off:off+length], access, nil)
}

// Len returns the registered length in bytes.
func (r *MR) Len() int { return len(r.buf) }

// Addr returns the registered address (what a peer writes to).
func (r *MR) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(&r.buf[0]))) }

// LKey returns the local key.
func (r *MR) LKey() uint32 { return r.lkey }

// RKey returns the remote key a peer needs to access the region.
func (r *MR) RKey() uint32 { return r.rkey }

// Words returns the region as 64-bit words (the region must be 8-byte
// aligned; a trailing partial word is left out). Read words a peer writes
// with sync/atomic; transport.SlotsOver wraps this slice.
func (r *MR) Words() []uint64 {
	if r.Addr()%8 != 0 {
		panic("verbs: MR not 8-byte aligned")
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&r.buf[0])), len(r.buf)/8)
}

// Remote describes the region to a peer: address, length and rkey.
func (r *MR) Remote() RemoteMR {
	return RemoteMR{Addr: r.Addr(), Len: uint64(len(r.buf)), RKey: r.rkey}
}

// Close deregisters the region (ibv_dereg_mr) and unmaps memory AllocMR
// mapped.
func (r *MR) Close() error { return r.pd.c.release(r) }

func (r *MR) destroy() error {
	if rc := C.ibv_dereg_mr(r.mr); rc != 0 {
		return newError("ibv_dereg_mr", int(rc))
	}
	r.mr = nil
	if r.own != nil {
		return r.own.Close()
	}
	return nil
}

// RemoteMR is a peer's registered region as exchanged out of band.
type RemoteMR struct {
	Addr uint64 // address of the first registered byte in the peer
	Len  uint64 // registered length in bytes
	RKey uint32 // the region's remote key
}

// Word returns the remote address of 64-bit word i of the region. It does
// not check bounds: the device does (a write outside completes with
// WCRemAccessErr).
func (m RemoteMR) Word(i int) RemoteAddr { return RemoteAddr{Addr: m.Addr + uint64(i)*8, RKey: m.RKey} }

// RemoteAddr is one remote address and the rkey of its region.
type RemoteAddr struct {
	Addr uint64 // address in the peer's memory
	RKey uint32 // remote key of the region holding it
}
