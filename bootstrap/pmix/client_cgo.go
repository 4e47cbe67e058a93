//go:build pmix && cgo

package pmix

/*
#cgo pkg-config: pmix
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <pmix.h>

static pmix_proc_t vg_me;

static int vg_init(char *nspace, uint32_t *rank) {
	pmix_status_t rc = PMIx_Init(&vg_me, NULL, 0);
	if (rc != PMIX_SUCCESS) return rc;
	strncpy(nspace, vg_me.nspace, PMIX_MAX_NSLEN);
	nspace[PMIX_MAX_NSLEN] = 0;
	*rank = vg_me.rank;
	return PMIX_SUCCESS;
}

static int vg_finalize(void) { return PMIx_Finalize(NULL, 0); }

// vg_get fetches key of rank (PMIX_RANK_WILDCARD for job-level data).
// optional: look only in the local store; timeout: seconds, 0 = none.
static int vg_get(uint32_t rank, const char *key, int optional, int timeout, pmix_value_t **val) {
	pmix_proc_t p;
	pmix_info_t *info;
	size_t n = 0;
	bool t = true;
	pmix_status_t rc;
	PMIX_PROC_LOAD(&p, vg_me.nspace, rank);
	PMIX_INFO_CREATE(info, 2);
	if (optional) PMIx_Info_load(&info[n++], PMIX_OPTIONAL, &t, PMIX_BOOL);
	if (timeout > 0) PMIx_Info_load(&info[n++], PMIX_TIMEOUT, &timeout, PMIX_INT);
	rc = PMIx_Get(&p, key, n ? info : NULL, n, val);
	PMIX_INFO_FREE(info, 2);
	return rc;
}

static int vg_get_u32(uint32_t rank, const char *key, int optional, uint32_t *out) {
	pmix_value_t *v = NULL;
	pmix_status_t rc = vg_get(rank, key, optional, 0, &v);
	if (rc != PMIX_SUCCESS) return rc;
	switch (v->type) {
	case PMIX_UINT32: *out = v->data.uint32; break;
	case PMIX_UINT16: *out = v->data.uint16; break;
	case PMIX_INT:    *out = (uint32_t)v->data.integer; break;
	case PMIX_UINT64: *out = (uint32_t)v->data.uint64; break;
	default: rc = PMIX_ERR_TYPE_MISMATCH;
	}
	PMIX_VALUE_RELEASE(v);
	return rc;
}

// vg_get_bytes returns a malloc'd copy of a string or byte-object value.
static int vg_get_bytes(uint32_t rank, const char *key, int optional, int timeout, char **out, size_t *len) {
	pmix_value_t *v = NULL;
	pmix_status_t rc = vg_get(rank, key, optional, timeout, &v);
	if (rc != PMIX_SUCCESS) return rc;
	const char *src = NULL;
	size_t n = 0;
	if (v->type == PMIX_STRING && v->data.string != NULL) {
		src = v->data.string;
		n = strlen(src);
	} else if (v->type == PMIX_BYTE_OBJECT) {
		src = v->data.bo.bytes;
		n = v->data.bo.size;
	} else {
		PMIX_VALUE_RELEASE(v);
		return PMIX_ERR_TYPE_MISMATCH;
	}
	*out = malloc(n + 1);
	if (*out == NULL) {
		PMIX_VALUE_RELEASE(v);
		return PMIX_ERR_NOMEM;
	}
	if (n > 0) memcpy(*out, src, n);
	(*out)[n] = 0;
	*len = n;
	PMIX_VALUE_RELEASE(v);
	return PMIX_SUCCESS;
}

static int vg_put_string(const char *key, const char *s) {
	pmix_value_t v;
	pmix_status_t rc;
	PMIX_VALUE_CONSTRUCT(&v);
	if ((rc = PMIx_Value_load(&v, s, PMIX_STRING)) != PMIX_SUCCESS) return rc;
	rc = PMIx_Put(PMIX_GLOBAL, key, &v);
	PMIX_VALUE_DESTRUCT(&v);
	return rc;
}

static int vg_put_bytes(const char *key, char *b, size_t n) {
	pmix_value_t v;
	pmix_byte_object_t bo;
	pmix_status_t rc;
	bo.bytes = b;
	bo.size = n;
	PMIX_VALUE_CONSTRUCT(&v);
	if ((rc = PMIx_Value_load(&v, &bo, PMIX_BYTE_OBJECT)) != PMIX_SUCCESS) return rc;
	rc = PMIx_Put(PMIX_GLOBAL, key, &v);
	PMIX_VALUE_DESTRUCT(&v);
	return rc;
}

static int vg_commit(void) { return PMIx_Commit(); }

// vg_fence fences the whole job, collecting the committed data.
static int vg_fence(int timeout) {
	pmix_proc_t all;
	pmix_info_t *info;
	size_t n = 0;
	bool t = true;
	pmix_status_t rc;
	PMIX_PROC_LOAD(&all, vg_me.nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_CREATE(info, 2);
	PMIx_Info_load(&info[n++], PMIX_COLLECT_DATA, &t, PMIX_BOOL);
	if (timeout > 0) PMIx_Info_load(&info[n++], PMIX_TIMEOUT, &timeout, PMIX_INT);
	rc = PMIx_Fence(&all, 1, info, n);
	PMIX_INFO_FREE(info, 2);
	return rc;
}
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
	if rc == C.PMIX_SUCCESS {
		return nil
	}
	return &Error{Op: op, Status: int(rc), Text: C.GoString(C.PMIx_Error_string(C.pmix_status_t(rc)))}
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
	var ns [C.PMIX_MAX_NSLEN + 1]C.char
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
	if err := status("PMIx_Get(PMIX_JOB_SIZE)", C.vg_get_u32(C.PMIX_RANK_WILDCARD, ksize, 0, &size)); err != nil {
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
		if C.vg_get_u32(C.uint32_t(r), knode, 1, &id) == C.PMIX_SUCCESS {
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
