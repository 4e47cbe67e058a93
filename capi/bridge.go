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
	"os"
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
		version:          C.VIGIL_EVENT_VERSION,
		detected_unix_ns: C.int64_t(e.detectedUnix), delivered_mono_ns: C.int64_t(e.deliveredMono)}
}

// allgatherBootstrap exchanges addresses through the application's
// allgather (vigil_config.allgather), and learns every rank's host through
// it too (gatherNodes).
type allgatherBootstrap struct {
	staticIdentity
	fn    C.vigil_allgather_fn
	user  unsafe.Pointer
	nodes []string // every rank's host, once gathered
}

// Nodes implements bootstrap.NodeLister: nil until gatherNodes ran.
func (b *allgatherBootstrap) Nodes() []string { return b.nodes }

// gatherNodes learns every rank's host through the allgather: its host name
// and network namespace, so that ranks of one machine in different network
// namespaces (containers), which loopback does not join, count as different
// hosts. Every rank must call it, first thing in vigil_start: it is one
// collective allgather.
func (b *allgatherBootstrap) gatherNodes() error {
	id, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("host name: %w", err)
	}
	if ns, err := os.Readlink("/proc/self/ns/net"); err == nil {
		id += "/" + ns
	}
	if len(id) >= C.VIGIL_ADDR_MAX {
		id = id[:C.VIGIL_ADDR_MAX-1]
	}
	nodes, err := b.allgather(id)
	if err != nil {
		return err
	}
	for r, n := range nodes {
		if n == "" {
			return fmt.Errorf("the allgather gave rank %d no host", r)
		}
	}
	b.nodes = nodes
	return nil
}

// Exchange implements bootstrap.Bootstrap. It must run on the thread that
// called vigil_start: no goroutine switch happens between that call and
// this one, so the cgo call below is made from that same OS thread.
func (b *allgatherBootstrap) Exchange(_ context.Context, addr string) ([]string, error) {
	out, err := b.allgather(addr)
	if err != nil {
		return nil, err
	}
	for r, a := range out {
		if a == "" {
			return nil, fmt.Errorf("the allgather gave rank %d an empty address", r)
		}
	}
	if out[b.rank] != addr {
		return nil, fmt.Errorf("the allgather put %q at this rank's index %d, want %q", out[b.rank], b.rank, addr)
	}
	return out, nil
}

// allgather is one call of the application's allgather: s (shorter than
// VIGIL_ADDR_MAX) from this rank, every rank's string back.
func (b *allgatherBootstrap) allgather(s string) ([]string, error) {
	if len(s) >= C.VIGIL_ADDR_MAX {
		return nil, fmt.Errorf("%q longer than VIGIL_ADDR_MAX-1 bytes", s)
	}
	const w = C.VIGIL_ADDR_MAX
	send := C.calloc(1, w)
	defer C.free(send)
	recv := C.calloc(C.size_t(b.size), w)
	if recv == nil {
		return nil, errors.New("out of memory for the allgather buffer")
	}
	defer C.free(recv)
	copy(unsafe.Slice((*byte)(send), w), s)
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
		out[r] = string(e)
	}
	return out, nil
}
