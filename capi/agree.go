package main

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc
#define VIGIL_NO_PROTOTYPES
#include <stdlib.h>
#include "vigil.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// The agreement functions of vigil.h: vigil_agree, vigil_shrink and
// vigil_failure_ack, over node.Node's Early Returning Agreement (seed 001).

// agreeOps maps the VIGIL_OP_* codes to the node's operations.
var agreeOps = map[C.int]node.AgreeOp{
	C.VIGIL_OP_BAND: node.OpAND,
	C.VIGIL_OP_BOR:  node.OpOR,
	C.VIGIL_OP_MIN:  node.OpMin,
	C.VIGIL_OP_MAX:  node.OpMax,
}

// agreeNode returns the started ring-mode node for fn.
func agreeNode(fn string) (*node.Node, C.int) {
	inst, rc := get(fn, true)
	if inst == nil {
		return nil, rc
	}
	if inst.mode != modeRing || inst.nd == nil {
		return nil, failf(eState, "%s: agreements need ring mode (VIGIL_MODE_RING)", fn)
	}
	select {
	case <-inst.quit:
		return nil, failf(eState, "%s: finalized", fn)
	default:
	}
	return inst.nd, vOK
}

// agreeContext bounds a call by timeoutNs (≤ 0: no bound).
func agreeContext(timeoutNs C.int64_t) (context.Context, context.CancelFunc) {
	if timeoutNs <= 0 {
		return context.WithCancel(context.Background())
	}
	return context.WithTimeout(context.Background(), time.Duration(timeoutNs))
}

// agreeFail maps an error of node.Agree to a status code.
func agreeFail(fn string, err error) C.int {
	switch {
	case errors.Is(err, node.ErrEvicted):
		return fail(eEvicted, fmt.Errorf("%s: %w", fn, err))
	case errors.Is(err, transport.ErrClosed):
		return fail(eState, fmt.Errorf("%s: finalized during the agreement: %w", fn, err))
	case errors.Is(err, context.DeadlineExceeded):
		return fail(eTimeout, fmt.Errorf("%s: %w (the agreement goes on without this call; the next call is the next agreement)", fn, err))
	}
	return fail(eInternal, fmt.Errorf("%s: %w", fn, err))
}

// copyRanks writes up to len(dst) of rs to dst.
func copyRanks(buf *C.uint32_t, n C.size_t, rs []ranks.Rank) {
	if buf == nil || n == 0 {
		return
	}
	dst := unsafe.Slice((*uint32)(unsafe.Pointer(buf)), int(n))
	copy(dst, rs)
}

// vigil_agree runs one agreement (vigil.h).
//
//export vigil_agree
func vigil_agree(op C.int, value unsafe.Pointer, length C.size_t, res *C.vigil_agreement,
	dead *C.uint32_t, deadLen C.size_t, timeoutNs C.int64_t) C.int {
	nd, rc := agreeNode("vigil_agree")
	if nd == nil {
		return rc
	}
	aop, ok := agreeOps[op]
	switch {
	case !ok:
		return failf(eInvalid, "vigil_agree: op %d is not a VIGIL_OP_* code", int(op))
	case value == nil && length > 0:
		return failf(eInvalid, "vigil_agree: value is NULL with len %d", uint64(length))
	case (aop == node.OpMin || aop == node.OpMax) && length != 8:
		return failf(eInvalid, "vigil_agree: VIGIL_OP_MIN and VIGIL_OP_MAX take a uint64_t (len 8), not len %d", uint64(length))
	case length > 1<<16:
		return failf(eInvalid, "vigil_agree: len %d exceeds 65536 bytes", uint64(length))
	case dead == nil && deadLen > 0:
		return failf(eInvalid, "vigil_agree: dead is NULL with dead_len %d", uint64(deadLen))
	}
	var in []byte
	if length > 0 {
		in = C.GoBytes(value, C.int(length))
	}
	if aop == node.OpMin || aop == node.OpMax { // host order → the operands' little-endian
		in = binary.LittleEndian.AppendUint64(nil, binary.NativeEndian.Uint64(unsafe.Slice((*byte)(value), 8)))
	}
	ctx, cancel := agreeContext(timeoutNs)
	defer cancel()
	a, err := nd.Agree(ctx, aop, in)
	if err != nil {
		return agreeFail("vigil_agree", err)
	}
	if len(a.Value) != int(length) {
		return failf(eInvalid, "vigil_agree: the decided value has %d bytes, this rank passed len %d (every rank must pass the same len)", len(a.Value), uint64(length))
	}
	if aop == node.OpMin || aop == node.OpMax {
		binary.NativeEndian.PutUint64(unsafe.Slice((*byte)(value), 8), binary.LittleEndian.Uint64(a.Value))
	} else if length > 0 {
		copy(unsafe.Slice((*byte)(value), int(length)), a.Value)
	}
	copyRanks(dead, deadLen, a.Dead)
	if res != nil {
		res.seq = C.uint64_t(a.ID.Seq)
		res.ndead = C.size_t(len(a.Dead))
		res.unacked = 0
		if a.Unacked {
			res.unacked = 1
		}
	}
	return vOK
}

// vigil_shrink agrees on the survivors (vigil.h).
//
//export vigil_shrink
func vigil_shrink(buf *C.uint32_t, n C.size_t, timeoutNs C.int64_t) C.long {
	nd, rc := agreeNode("vigil_shrink")
	if nd == nil {
		return C.long(rc)
	}
	if buf == nil && n > 0 {
		return C.long(failf(eInvalid, "vigil_shrink: buf is NULL with len %d", uint64(n)))
	}
	ctx, cancel := agreeContext(timeoutNs)
	defer cancel()
	alive, err := nd.Shrink(ctx)
	if err != nil {
		return C.long(agreeFail("vigil_shrink", err))
	}
	copyRanks(buf, n, alive)
	return C.long(len(alive))
}

// vigil_failure_ack acknowledges the failures known now (vigil.h).
//
//export vigil_failure_ack
func vigil_failure_ack() C.int {
	nd, rc := agreeNode("vigil_failure_ack")
	if nd == nil {
		return rc
	}
	if err := nd.AckFailures(); err != nil {
		return agreeFail("vigil_failure_ack", err)
	}
	return vOK
}
