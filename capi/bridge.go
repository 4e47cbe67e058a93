package main

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc
#define VIGIL_NO_PROTOTYPES
#include <stdlib.h>
#include "vigil.h"

// Calls through C function pointers, which Go cannot make itself.
static void vg_call_failure(vigil_failure_fn fn, const vigil_event *ev, void *user) { fn(ev, user); }
static int vg_call_allgather(vigil_allgather_fn fn, const void *send, void *recv, size_t len, void *user) {
	return fn(send, recv, len, user);
}
*/
import "C"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"unsafe"
)

// callback is a C failure callback and its user pointer.
type callback struct {
	fn   C.vigil_failure_fn
	user unsafe.Pointer
}

func (cb *callback) call(ev *C.vigil_event) { C.vg_call_failure(cb.fn, ev, cb.user) }

// cEvent converts an event for C.
func (e event) c() C.vigil_event {
	return C.vigil_event{kind: C.int(e.kind), rank: C.uint32_t(e.rank), detector: C.uint32_t(e.detector),
		detected_unix_ns: C.int64_t(e.detectedUnix), delivered_mono_ns: C.int64_t(e.deliveredMono)}
}

// allgatherBootstrap exchanges addresses through the application's
// allgather (MPI_Allgather in the PMPI library), on the calling thread.
type allgatherBootstrap struct {
	staticIdentity
	fn   C.vigil_allgather_fn
	user unsafe.Pointer
}

// Exchange implements bootstrap.Bootstrap. It must run on the thread that
// called vigil_start: no goroutine switch happens between that call and
// this one, so the cgo call below is made from that same OS thread.
func (b *allgatherBootstrap) Exchange(_ context.Context, addr string) ([]string, error) {
	if len(addr) >= C.VIGIL_ADDR_MAX {
		return nil, fmt.Errorf("address %q longer than VIGIL_ADDR_MAX-1 bytes", addr)
	}
	const w = C.VIGIL_ADDR_MAX
	send := C.calloc(1, w)
	defer C.free(send)
	recv := C.calloc(C.size_t(b.size), w)
	if recv == nil {
		return nil, errors.New("out of memory for the allgather buffer")
	}
	defer C.free(recv)
	copy(unsafe.Slice((*byte)(send), w), addr)
	if rc := C.vg_call_allgather(b.fn, send, recv, w, b.user); rc != 0 {
		return nil, fmt.Errorf("the allgather function returned %d", int(rc))
	}
	table := unsafe.Slice((*byte)(recv), b.size*w)
	out := make([]string, b.size)
	for r := range out {
		e := table[r*w : (r+1)*w]
		if i := bytes.IndexByte(e, 0); i >= 0 {
			e = e[:i]
		}
		if len(e) == 0 {
			return nil, fmt.Errorf("the allgather gave rank %d an empty address", r)
		}
		out[r] = string(e)
	}
	if out[b.rank] != addr {
		return nil, fmt.Errorf("the allgather put %q at this rank's index %d, want %q", out[b.rank], b.rank, addr)
	}
	return out, nil
}
