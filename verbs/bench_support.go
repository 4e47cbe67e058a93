package verbs

/*
#cgo noescape vv_nop
#cgo nocallback vv_nop
#cgo nocallback vv_hbw_write_n
#include "vverbs.h"
*/
import "C"

// Benchmark support: separates the cost of a cgo crossing from the cost of
// the verbs work behind it (see the benchmarks in verbs_test.go).

// cgoNop makes one cgo call to a C function that does nothing.
func cgoNop(x int) int { return int(C.vv_nop(C.int(x))) }

// WriteN does what n Write calls would (values first..first+n-1, the same
// signalling and completion handling) in one cgo call: the C loop that the
// CPU-per-heartbeat benchmarks compare the Go path with.
func (w *Writer) WriteN(to RemoteAddr, first, n uint64) error {
	if w.st == nil {
		return ErrClosed
	}
	rc := C.vv_hbw_write_n(w.st, C.uint64_t(to.Addr), C.uint32_t(to.RKey), C.uint64_t(first), C.uint64_t(n))
	if rc == 0 {
		return nil
	}
	return w.fail(rc, "ibv_post_send(RDMA WRITE inline)")
}
