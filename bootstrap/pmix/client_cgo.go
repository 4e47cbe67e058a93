//go:build cgo

package pmix

/*
#include <stdlib.h>
#include "vgpmix.h"
*/
import "C"

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"time"
	"unsafe"
)

const available = true

// PMIx attribute names (the string macros of pmix_common.h).
const (
	attrJobSize  = "pmix.job.size" // PMIX_JOB_SIZE
	attrHostname = "pmix.hname"    // PMIX_HOSTNAME
	attrNodeID   = "pmix.nodeid"   // PMIX_NODEID
)

// joins counts the Joins of this process.
var joins atomic.Int64

func status(op string, rc C.int) error {
	if rc == C.VG_SUCCESS {
		return nil
	}
	return &Error{Op: op, Status: int(rc), Text: C.GoString(C.vg_strerror(rc))}
}

// open makes libpmix callable: a no-op when it is linked (tag pmix), else
// dlopen of $VIGIL_LIBPMIX, or libpmix.so.2.
func open() error {
	var path *C.char
	if p := os.Getenv(EnvLibrary); p != "" {
		path = C.CString(p)
		defer C.free(unsafe.Pointer(path))
	}
	var msg [512]C.char
	if C.vg_open(path, &msg[0], C.size_t(len(msg))) != 0 {
		return fmt.Errorf("%w (%s): install the PMIx library (Debian, Ubuntu: apt-get install libpmix2, which openmpi-bin brings), set %s to its path, or build with -tags pmix against libpmix-dev",
			ErrNoLibrary, C.GoString(&msg[0]), EnvLibrary)
	}
	return nil
}

// timeoutSeconds turns ctx's deadline into PMIX_TIMEOUT (0: none).
func timeoutSeconds(ctx context.Context) C.int {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	s := math.Ceil(time.Until(d).Seconds())
	return C.int(min(max(s, 1), math.MaxInt32))
}

func join(ctx context.Context) (*Client, error) {
	if err := open(); err != nil {
		return nil, err
	}
	var ns [C.VG_MAX_NSLEN + 1]C.char
	var rank C.uint32_t
	if err := status("PMIx_Init", C.vg_init(&ns[0], &rank)); err != nil {
		return nil, fmt.Errorf("%w (is this process running under a PMIx launcher such as mpirun?)", err)
	}
	c := &Client{rank: uint32(rank), nspace: C.GoString(&ns[0]), join: joins.Add(1) - 1}
	keySecret, keyHost := fmt.Sprintf(keySecret, c.join), fmt.Sprintf(keyHost, c.join)
	fail := func(err error) (*Client, error) {
		C.vg_finalize()
		return nil, err
	}
	ksize := C.CString(attrJobSize)
	defer C.free(unsafe.Pointer(ksize))
	var size C.uint32_t
	if err := status("PMIx_Get(PMIX_JOB_SIZE)", C.vg_get_u32(C.VG_RANK_WILDCARD, ksize, 0, &size)); err != nil {
		return fail(err)
	}
	if size < 1 || uint32(rank) >= uint32(size) {
		return fail(fmt.Errorf("pmix: rank %d, job size %d", rank, size))
	}
	c.size = int(size)
	c.jobID = JobIDOf(c.nspace)

	// One fence distributes rank 0's secret and every rank's host name.
	if c.rank == 0 {
		secret := make([]byte, SecretLen)
		if _, err := rand.Read(secret); err != nil {
			return fail(err)
		}
		if err := putBytes(keySecret, secret); err != nil {
			return fail(err)
		}
	}
	host, _ := os.Hostname()
	if err := putString(keyHost, host); err != nil {
		return fail(err)
	}
	if err := status("PMIx_Commit", C.vg_commit()); err != nil {
		return fail(err)
	}
	if err := fence(ctx); err != nil {
		return fail(err)
	}
	secret, err := getBytes(0, keySecret, false, timeoutSeconds(ctx))
	if err != nil {
		return fail(err)
	}
	if len(secret) != SecretLen {
		return fail(fmt.Errorf("pmix: rank 0's %s has %d bytes, want %d", keySecret, len(secret), SecretLen))
	}
	c.key = DeriveKey(c.nspace, secret)
	if c.nodes, err = nodes(c.size, keyHost); err != nil {
		return fail(err)
	}
	return c, nil
}

// nodes returns every rank's PMIX_HOSTNAME, or failing that its node ID,
// or failing that the host name it Put during Join.
func nodes(size int, keyHost string) ([]string, error) {
	khost, knode, kmine := C.CString(attrHostname), C.CString(attrNodeID), C.CString(keyHost)
	defer C.free(unsafe.Pointer(khost))
	defer C.free(unsafe.Pointer(knode))
	defer C.free(unsafe.Pointer(kmine))
	out := make([]string, size)
	for r := range out {
		if b, err := getBytesC(C.uint32_t(r), khost, true, 0); err == nil && len(b) > 0 {
			out[r] = string(b)
			continue
		}
		var id C.uint32_t
		if C.vg_get_u32(C.uint32_t(r), knode, 1, &id) == C.VG_SUCCESS {
			out[r] = fmt.Sprintf("node%d", id)
			continue
		}
		b, err := getBytesC(C.uint32_t(r), kmine, false, 10)
		if err != nil {
			return nil, fmt.Errorf("pmix: node of rank %d: %w", r, err)
		}
		out[r] = string(b)
	}
	return out, nil
}

func putString(key, val string) error {
	k, v := C.CString(key), C.CString(val)
	defer C.free(unsafe.Pointer(k))
	defer C.free(unsafe.Pointer(v))
	return status("PMIx_Put("+key+")", C.vg_put_string(k, v))
}

func putBytes(key string, val []byte) error {
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	v := C.CBytes(val)
	defer C.free(v)
	return status("PMIx_Put("+key+")", C.vg_put_bytes(k, (*C.char)(v), C.size_t(len(val))))
}

func getBytes(rank uint32, key string, optional bool, timeout C.int) ([]byte, error) {
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	return getBytesC(C.uint32_t(rank), k, optional, timeout)
}

func getBytesC(rank C.uint32_t, key *C.char, optional bool, timeout C.int) ([]byte, error) {
	var p *C.char
	var n C.size_t
	opt := C.int(0)
	if optional {
		opt = 1
	}
	if err := status("PMIx_Get("+C.GoString(key)+")", C.vg_get_bytes(rank, key, opt, timeout, &p, &n)); err != nil {
		return nil, fmt.Errorf("rank %d: %w", rank, err)
	}
	defer C.free(unsafe.Pointer(p))
	return C.GoBytes(unsafe.Pointer(p), C.int(n)), nil
}

// fence runs PMIx_Fence over the whole job with PMIX_COLLECT_DATA, and
// returns early with ctx's error if ctx ends first.
func fence(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	timeout := timeoutSeconds(ctx)
	done := make(chan error, 1)
	go func() { done <- status("PMIx_Fence", C.vg_fence(timeout)) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("pmix: waiting for the other ranks in PMIx_Fence: %w", ctx.Err())
	}
}

func (c *Client) exchange(ctx context.Context, key, addr string) ([]string, error) {
	if err := putString(key, addr); err != nil {
		return nil, err
	}
	if err := status("PMIx_Commit", C.vg_commit()); err != nil {
		return nil, err
	}
	if err := fence(ctx); err != nil {
		c.broken = fmt.Errorf("pmix: an earlier exchange did not complete: %w", err)
		return nil, err
	}
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	out := make([]string, c.size)
	for r := range out {
		b, err := getBytesC(C.uint32_t(r), k, false, timeoutSeconds(ctx))
		if err != nil {
			return nil, fmt.Errorf("pmix: address of rank %d: %w", r, err)
		}
		out[r] = string(b)
	}
	return out, nil
}

func (c *Client) finalize() error { return status("PMIx_Finalize", C.vg_finalize()) }
