// Package verbs is Vigil's thin layer over libibverbs: device discovery,
// protection domains, memory regions on mmap'ed memory, completion queues
// with completion channels, RC and UD queue pairs, and the two data paths
// Vigil needs — an inline RDMA WRITE of one 64-bit heartbeat word into a
// peer's registered slot array (Writer), and SEND/RECV of protocol messages
// with a replenished receive ring (RecvRing).
//
// # Objects and lifetimes
//
// Open returns a Context for one device. Every object made from it (PD, MR,
// CQ, QP, SRQ, AH, Writer, RecvRing) is tracked by the Context and freed by its
// own Close; Context.Close frees whatever is still open in reverse order of
// creation, then closes the device. A verbs call that fails to free an
// object (ibv_dealloc_pd with a registered MR left, for instance) leaves the
// object tracked and returns the error, so a leak shows up as an error.
//
// # Memory
//
// Memory the device reads or writes is never Go heap memory: Mmap returns
// anonymous mmap'ed memory (golang.org/x/sys/unix), which PD.Register
// registers, and PD.AllocMR does both. Words a peer writes are read with
// sync/atomic (MR.Words gives 8-byte-aligned []uint64, the form
// transport.SlotsOver wraps).
//
// # Fast path
//
// ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq are static
// inline functions in <infiniband/verbs.h>, which cgo cannot call: each
// operation is one small C function in vverbs.c (one cgo call per heartbeat
// write, completions included; one per receive batch). Writer.Write does not
// allocate.
//
// # Errors
//
// A failing verbs call returns *Error, which names the call and wraps its
// errno; a failed work completion is a *WCError with its ibv_wc_status. On a
// machine without an RDMA device the entry points return ErrNoDevice.
//
// # Concurrency
//
// Setup calls may be made from any goroutine. A Writer, a RecvRing and a CQ
// are used by one goroutine at a time (the heartbeat emitter's pinned thread,
// the receive loop); Close must not race with their use.
//
// The package builds wherever libibverbs-dev is installed; its tests run for
// real on soft-RoCE (rdma_rxe) in a qemu guest: lab/rxe/run.sh.
package verbs
