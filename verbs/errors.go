package verbs

/*
#include <infiniband/verbs.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrNoDevice is returned when the system has no RDMA device at all.
var ErrNoDevice = errors.New("verbs: no RDMA device found (is rdma_rxe loaded?)")

// ErrClosed is returned by operations on a closed object.
var ErrClosed = errors.New("verbs: object is closed")

// ErrQueueFull is returned by Writer.Write when the send queue stayed full
// for the writer's wait limit (the peer does not acknowledge).
var ErrQueueFull = errors.New("verbs: send queue full (no completion in time)")

// Error is a failed verbs (or sysfs/mmap) call: Op names the call, Errno is
// the errno it reported.
type Error struct {
	Op    string        // the failing call, e.g. "ibv_modify_qp(RTR)"
	Errno syscall.Errno // the errno it reported
}

// Error formats as "verbs: <call>: <errno text> (errno N)".
func (e *Error) Error() string {
	return fmt.Sprintf("verbs: %s: %v (errno %d)", e.Op, e.Errno, int(e.Errno))
}

// Unwrap returns the errno, so errors.Is(err, syscall.EBUSY) works.
func (e *Error) Unwrap() error { return e.Errno }

// newError builds an *Error from a verbs return value or errno; a zero errno
// (a call that failed without setting errno) becomes EIO.
func newError(op string, errno int) error {
	if errno < 0 {
		errno = -errno
	}
	if errno == 0 {
		errno = int(syscall.EIO)
	}
	return &Error{Op: op, Errno: syscall.Errno(errno)}
}

// errnoOf extracts the errno from a cgo call's second result.
func errnoOf(err error) int {
	var en syscall.Errno
	if errors.As(err, &en) {
		return int(en)
	}
	return 0
}

// WCStatus is an ibv_wc_status: the outcome of a work request.
type WCStatus int

// Work completion statuses (enum ibv_wc_status).
const (
	WCSuccess        WCStatus = C.IBV_WC_SUCCESS
	WCLocLenErr      WCStatus = C.IBV_WC_LOC_LEN_ERR
	WCLocQPOpErr     WCStatus = C.IBV_WC_LOC_QP_OP_ERR
	WCLocProtErr     WCStatus = C.IBV_WC_LOC_PROT_ERR
	WCWRFlushErr     WCStatus = C.IBV_WC_WR_FLUSH_ERR
	WCBadRespErr     WCStatus = C.IBV_WC_BAD_RESP_ERR
	WCLocAccessErr   WCStatus = C.IBV_WC_LOC_ACCESS_ERR
	WCRemInvReqErr   WCStatus = C.IBV_WC_REM_INV_REQ_ERR
	WCRemAccessErr   WCStatus = C.IBV_WC_REM_ACCESS_ERR
	WCRemOpErr       WCStatus = C.IBV_WC_REM_OP_ERR
	WCRetryExcErr    WCStatus = C.IBV_WC_RETRY_EXC_ERR
	WCRNRRetryExcErr WCStatus = C.IBV_WC_RNR_RETRY_EXC_ERR
	WCRemAbortErr    WCStatus = C.IBV_WC_REM_ABORT_ERR
	WCGeneralErr     WCStatus = C.IBV_WC_GENERAL_ERR
	WCFatalErr       WCStatus = C.IBV_WC_FATAL_ERR
	WCRespTimeoutErr WCStatus = C.IBV_WC_RESP_TIMEOUT_ERR
	WCLocEECOpErr    WCStatus = C.IBV_WC_LOC_EEC_OP_ERR
	WCInvEECStateErr WCStatus = C.IBV_WC_INV_EEC_STATE_ERR
	WCInvEECNErr     WCStatus = C.IBV_WC_INV_EECN_ERR
	WCLocRDDViolErr  WCStatus = C.IBV_WC_LOC_RDD_VIOL_ERR
	WCRemInvRDReqErr WCStatus = C.IBV_WC_REM_INV_RD_REQ_ERR
	WCMWBindErr      WCStatus = C.IBV_WC_MW_BIND_ERR
	WCTMErr          WCStatus = C.IBV_WC_TM_ERR
)

// String returns libibverbs' name for the status (ibv_wc_status_str).
func (s WCStatus) String() string {
	return C.GoString(C.ibv_wc_status_str(C.enum_ibv_wc_status(s)))
}

// WCError is a work request that completed with an error status.
type WCError struct {
	Op        string   // what was being done ("RDMA WRITE", "SEND", "RECV")
	Status    WCStatus // the completion status
	VendorErr uint32   // device-specific error detail
}

// Error formats as "verbs: <op> completed with <status> (status N, vendor_err 0xX)".
func (e *WCError) Error() string {
	return fmt.Sprintf("verbs: %s completed with %v (status %d, vendor_err 0x%x)",
		e.Op, e.Status, int(e.Status), e.VendorErr)
}
