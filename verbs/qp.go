package verbs

/*
#include <stdlib.h>
#include "vverbs.h"
*/
import "C"

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"unsafe"
)

// QPType is a queue pair transport.
type QPType int

// Supported transports.
const (
	RC QPType = C.IBV_QPT_RC // reliable connected: RDMA WRITE, SEND
	UD QPType = C.IBV_QPT_UD // unreliable datagram: SEND to any UD QP via an AH
)

// String names the transport.
func (t QPType) String() string {
	switch t {
	case RC:
		return "RC"
	case UD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", int(t))
}

// DefaultQKey is the Q_Key UD QPs use unless QPConfig says otherwise.
const DefaultQKey = 0x11111111

// QPConfig says how to create a queue pair. Zero fields take the defaults
// in brackets.
type QPConfig struct {
	Type       QPType // RC or UD
	SendCQ     *CQ    // required
	RecvCQ     *CQ    // [SendCQ]
	MaxSendWR  int    // [128]
	MaxRecvWR  int    // [128]
	MaxSendSGE int    // [1]
	MaxRecvSGE int    // [1]
	MaxInline  int    // [64] bytes of inline data
	Port       int    // [1]
	// UseGIDIndex makes the QP use source GID GIDIndex; by default it uses
	// Context.PreferredGID(Port, Netdev).
	UseGIDIndex bool
	GIDIndex    int // source GID table index, with UseGIDIndex
	// Netdev restricts the preferred GID to one network device's GIDs.
	Netdev string
	// Access is what the peer may do to this side's memory through an RC
	// QP [AccessRemoteWrite].
	Access Access
	// QKey for UD [DefaultQKey].
	QKey uint32
	// SRQ, for RC, is a shared receive queue the QP takes its receives
	// from (MaxRecvWR is then ignored; post receives on the SRQ).
	SRQ *SRQ
}

// QP is a queue pair. Its Post* methods share per-QP scratch memory: use
// them from one goroutine at a time.
type QP struct {
	pd       *PD
	qp       *C.struct_ibv_qp
	typ      QPType
	sendCQ   *CQ
	recvCQ   *CQ
	port     int
	gid      GIDEntry
	link     LinkLayer
	lid      uint16
	mtu      MTU
	psn      uint32
	qkey     uint32
	sendWR   int
	recvWR   int
	inline   int
	send     C.struct_vv_send // scratch for Post* (setup path)
	sendData unsafe.Pointer   // C scratch for inline payloads
}

// CreateQP creates a queue pair and moves it to INIT (RC; Connect does RTR
// and RTS) or all the way to RTS (UD, ready to send at once).
func (p *PD) CreateQP(cfg QPConfig) (*QP, error) {
	if p.pd == nil {
		return nil, ErrClosed
	}
	if cfg.SendCQ == nil {
		return nil, fmt.Errorf("verbs: CreateQP: SendCQ is required")
	}
	if cfg.Type != RC && cfg.Type != UD {
		return nil, fmt.Errorf("verbs: CreateQP: unsupported type %v", cfg.Type)
	}
	if cfg.RecvCQ == nil {
		cfg.RecvCQ = cfg.SendCQ
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.MaxSendWR, 128)
	def(&cfg.MaxRecvWR, 128)
	def(&cfg.MaxSendSGE, 1)
	def(&cfg.MaxRecvSGE, 1)
	def(&cfg.MaxInline, 64)
	def(&cfg.Port, 1)
	if cfg.Access == 0 {
		cfg.Access = AccessRemoteWrite
	}
	if cfg.QKey == 0 {
		cfg.QKey = DefaultQKey
	}
	c := p.c
	pa, err := c.QueryPort(cfg.Port)
	if err != nil {
		return nil, err
	}
	var gid GIDEntry
	if !cfg.UseGIDIndex {
		if gid, err = c.PreferredGID(cfg.Port, cfg.Netdev); err != nil {
			return nil, err
		}
	} else {
		tab, err := c.GIDTable(cfg.Port)
		if err != nil {
			return nil, err
		}
		found := false
		for _, e := range tab {
			if e.Index == cfg.GIDIndex {
				gid, found = e, true
			}
		}
		if !found && pa.LinkLayer == LinkLayerEthernet {
			return nil, fmt.Errorf("verbs: %s port %d has no GID at index %d", c.name, cfg.Port, cfg.GIDIndex)
		}
		gid.Index = cfg.GIDIndex
	}
	psn := randPSN()
	a := C.struct_vv_qp_init{
		_type: C.int(cfg.Type), max_send_wr: C.int(cfg.MaxSendWR), max_recv_wr: C.int(cfg.MaxRecvWR),
		max_send_sge: C.int(cfg.MaxSendSGE), max_recv_sge: C.int(cfg.MaxRecvSGE),
		max_inline: C.int(cfg.MaxInline), port: C.int(cfg.Port), access: C.int(cfg.Access),
		qkey: C.uint32_t(cfg.QKey), psn: C.uint32_t(psn),
	}
	var op *C.char
	var en C.int
	var srq *C.struct_ibv_srq
	if cfg.SRQ != nil {
		if cfg.Type != RC || cfg.SRQ.srq == nil {
			return nil, fmt.Errorf("verbs: CreateQP: an SRQ needs an RC QP and an open SRQ")
		}
		srq = cfg.SRQ.srq
		a.max_recv_wr, a.max_recv_sge = 0, 0
	}
	qp := C.vv_create_qp(p.pd, cfg.SendCQ.cq, cfg.RecvCQ.cq, srq, &a, &op, &en)
	if qp == nil {
		return nil, newError(C.GoString(op), int(en))
	}
	q := &QP{
		pd: p, qp: qp, typ: cfg.Type, sendCQ: cfg.SendCQ, recvCQ: cfg.RecvCQ, port: cfg.Port,
		gid: gid, link: pa.LinkLayer, lid: pa.LID, mtu: pa.ActiveMTU, psn: psn, qkey: cfg.QKey,
		sendWR: int(a.got_send_wr), recvWR: int(a.got_recv_wr), inline: int(a.got_inline),
	}
	q.sendData = C.malloc(C.size_t(max(q.inline, 64)))
	if err := c.track(q); err != nil {
		q.destroy()
		return nil, err
	}
	return q, nil
}

// randPSN returns a random 24-bit packet sequence number.
func randPSN() uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0x123456
	}
	return binary.LittleEndian.Uint32(b[:]) & 0xffffff
}

// Num returns the QP number.
func (q *QP) Num() uint32 { return uint32(q.qp.qp_num) }

// Type returns the transport.
func (q *QP) Type() QPType { return q.typ }

// GID returns the source GID entry the QP uses.
func (q *QP) GID() GIDEntry { return q.gid }

// MaxSendWR returns the send queue depth the device granted.
func (q *QP) MaxSendWR() int { return q.sendWR }

// MaxRecvWR returns the receive queue depth the device granted.
func (q *QP) MaxRecvWR() int { return q.recvWR }

// MaxInline returns the inline data limit the device granted.
func (q *QP) MaxInline() int { return q.inline }

// Endpoint is what a peer needs to reach a QP, exchanged out of band.
type Endpoint struct {
	QPN  uint32 // queue pair number
	PSN  uint32 // initial packet sequence number of the QP's sends
	LID  uint16 // InfiniBand only
	GID  GID    // the QP's source GID (RoCE: an address of the netdev)
	QKey uint32 // UD only
}

// Endpoint returns this QP's endpoint.
func (q *QP) Endpoint() Endpoint {
	return Endpoint{QPN: q.Num(), PSN: q.psn, LID: q.lid, GID: q.gid.GID, QKey: q.qkey}
}

// RCParams are the path and retry settings of an RC connection.
type RCParams struct {
	// PathMTU (0: the port's active MTU).
	PathMTU MTU
	// Timeout is the local ACK timeout exponent: 4.096 µs · 2^Timeout per
	// try; 0 waits forever. A dead peer shows after about
	// (RetryCnt+1) · 4.096 µs · 2^Timeout.
	Timeout uint8
	// RetryCnt is how often a packet is retried on timeout (0..7).
	RetryCnt uint8
	// RNRRetry is how often to retry on receiver-not-ready (7: forever).
	RNRRetry uint8
	// MinRNRTimer is the receiver-not-ready NAK delay code (1..31).
	MinRNRTimer uint8
	// MaxRdAtomic and MaxDestRdAtomic bound outstanding RDMA READs/atomics.
	MaxRdAtomic, MaxDestRdAtomic uint8
	// HopLimit is the GRH hop limit (RoCE v2: the IP TTL).
	HopLimit uint8
	// TrafficClass is the GRH traffic class (RoCE v2: the IP DSCP/ECN byte).
	TrafficClass uint8
	// ServiceLevel is the InfiniBand SL (RoCE: the priority).
	ServiceLevel uint8
}

// DefaultRCParams returns Timeout 14 (≈ 67 ms), RetryCnt 7, RNRRetry 7,
// MinRNRTimer 12, one outstanding read, HopLimit 64: a dead peer shows
// after ≈ 0.5 s. Failure detection wants these smaller.
func DefaultRCParams() RCParams {
	return RCParams{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12,
		MaxRdAtomic: 1, MaxDestRdAtomic: 1, HopLimit: 64}
}

// Connect moves an RC QP from INIT through RTR to RTS towards remote
// (ibv_modify_qp). p nil means DefaultRCParams.
func (q *QP) Connect(remote Endpoint, p *RCParams) error {
	if q.qp == nil {
		return ErrClosed
	}
	if q.typ != RC {
		return fmt.Errorf("verbs: Connect on a %v QP", q.typ)
	}
	if p == nil {
		d := DefaultRCParams()
		p = &d
	}
	mtu := p.PathMTU
	if mtu == 0 {
		mtu = q.mtu
	}
	c := C.struct_vv_rc_conn{
		dest_qpn: C.uint32_t(remote.QPN), rq_psn: C.uint32_t(remote.PSN), sq_psn: C.uint32_t(q.psn),
		dlid: C.uint16_t(remote.LID), port: C.int(q.port), sgid_index: C.int(q.gid.Index),
		path_mtu: C.int(mtu), hop_limit: C.int(p.HopLimit), traffic_class: C.int(p.TrafficClass),
		sl: C.int(p.ServiceLevel), min_rnr_timer: C.int(p.MinRNRTimer),
		max_dest_rd_atomic: C.int(p.MaxDestRdAtomic), max_rd_atomic: C.int(p.MaxRdAtomic),
		timeout: C.int(p.Timeout), retry_cnt: C.int(p.RetryCnt), rnr_retry: C.int(p.RNRRetry),
	}
	// RoCE always routes by GID; InfiniBand only when the peer has no LID.
	if q.link == LinkLayerEthernet || remote.LID == 0 {
		c.is_global = 1
		for i, b := range remote.GID {
			c.dgid[i] = C.uint8_t(b)
		}
	}
	var op *C.char
	if rc := C.vv_connect_rc(q.qp, &c, &op); rc != 0 {
		return newError(C.GoString(op), int(rc))
	}
	return nil
}

// QPState is an ibv_qp_state.
type QPState int

// QP states.
const (
	QPReset QPState = C.IBV_QPS_RESET
	QPInit  QPState = C.IBV_QPS_INIT
	QPRTR   QPState = C.IBV_QPS_RTR
	QPRTS   QPState = C.IBV_QPS_RTS
	QPSQD   QPState = C.IBV_QPS_SQD
	QPSQE   QPState = C.IBV_QPS_SQE
	QPErr   QPState = C.IBV_QPS_ERR
)

// String names the state.
func (s QPState) String() string {
	switch s {
	case QPReset:
		return "RESET"
	case QPInit:
		return "INIT"
	case QPRTR:
		return "RTR"
	case QPRTS:
		return "RTS"
	case QPSQD:
		return "SQD"
	case QPSQE:
		return "SQE"
	case QPErr:
		return "ERR"
	}
	return fmt.Sprintf("QPState(%d)", int(s))
}

// State queries the QP's current state (ibv_query_qp).
func (q *QP) State() (QPState, error) {
	if q.qp == nil {
		return 0, ErrClosed
	}
	var s C.int
	if rc := C.vv_qp_state(q.qp, &s); rc != 0 {
		return 0, newError("ibv_query_qp", int(rc))
	}
	return QPState(s), nil
}

// SetError moves the QP to the error state: outstanding work requests
// complete with WCWRFlushErr.
func (q *QP) SetError() error {
	if q.qp == nil {
		return ErrClosed
	}
	if rc := C.vv_qp_to_error(q.qp); rc != 0 {
		return newError("ibv_modify_qp(ERR)", int(rc))
	}
	return nil
}

// Close destroys the QP (ibv_destroy_qp).
func (q *QP) Close() error { return q.pd.c.release(q) }

func (q *QP) destroy() error {
	if q.qp != nil {
		if rc := C.ibv_destroy_qp(q.qp); rc != 0 {
			return newError("ibv_destroy_qp", int(rc))
		}
		q.qp = nil
	}
	if q.sendData != nil {
		C.free(q.sendData)
		q.sendData = nil
	}
	return nil
}

// PostWrite posts an RDMA WRITE of length bytes at offset off of local to
// remote (RC). signalled asks for a completion on the send CQ with wrID.
func (q *QP) PostWrite(wrID uint64, local *MR, off, length int, remote RemoteAddr, signalled bool) error {
	if off < 0 || length < 0 || off+length > local.Len() {
		return fmt.Errorf("verbs: PostWrite range [%d,%d) outside the %d-byte MR", off, off+length, local.Len())
	}
	s := &q.send
	*s = C.struct_vv_send{wr_id: C.uint64_t(wrID), opcode: C.IBV_WR_RDMA_WRITE, flags: sigFlag(signalled),
		laddr: C.uint64_t(local.Addr() + uint64(off)), len: C.uint32_t(length), lkey: C.uint32_t(local.lkey),
		raddr: C.uint64_t(remote.Addr), rkey: C.uint32_t(remote.RKey)}
	return q.post("ibv_post_send(RDMA WRITE)", nil)
}

// PostWriteInline posts an RDMA WRITE of data, copied into the work request
// (IBV_SEND_INLINE: no registration needed), to remote.
func (q *QP) PostWriteInline(wrID uint64, data []byte, remote RemoteAddr, signalled bool) error {
	s := &q.send
	*s = C.struct_vv_send{wr_id: C.uint64_t(wrID), opcode: C.IBV_WR_RDMA_WRITE, flags: sigFlag(signalled),
		raddr: C.uint64_t(remote.Addr), rkey: C.uint32_t(remote.RKey)}
	return q.post("ibv_post_send(RDMA WRITE inline)", data)
}

// PostSend posts a SEND of length bytes at offset off of local (RC).
func (q *QP) PostSend(wrID uint64, local *MR, off, length int, signalled bool) error {
	if off < 0 || length < 0 || off+length > local.Len() {
		return fmt.Errorf("verbs: PostSend range [%d,%d) outside the %d-byte MR", off, off+length, local.Len())
	}
	s := &q.send
	*s = C.struct_vv_send{wr_id: C.uint64_t(wrID), opcode: C.IBV_WR_SEND, flags: sigFlag(signalled),
		laddr: C.uint64_t(local.Addr() + uint64(off)), len: C.uint32_t(length), lkey: C.uint32_t(local.lkey)}
	return q.post("ibv_post_send(SEND)", nil)
}

// PostSendInline posts a SEND of data inline (RC).
func (q *QP) PostSendInline(wrID uint64, data []byte, signalled bool) error {
	s := &q.send
	*s = C.struct_vv_send{wr_id: C.uint64_t(wrID), opcode: C.IBV_WR_SEND, flags: sigFlag(signalled)}
	return q.post("ibv_post_send(SEND inline)", data)
}

// UDDest addresses a UD QP: an address handle plus the QP number and Q_Key.
type UDDest struct {
	AH   *AH    // path to the remote port
	QPN  uint32 // remote UD QP number
	QKey uint32 // remote QP's Q_Key
}

// PostSendUD sends data inline to dest (UD). A UD message is at most one
// path MTU.
func (q *QP) PostSendUD(wrID uint64, dest UDDest, data []byte, signalled bool) error {
	if q.typ != UD {
		return fmt.Errorf("verbs: PostSendUD on a %v QP", q.typ)
	}
	if dest.AH == nil || dest.AH.ah == nil {
		return fmt.Errorf("verbs: PostSendUD without an address handle")
	}
	s := &q.send
	*s = C.struct_vv_send{wr_id: C.uint64_t(wrID), opcode: C.IBV_WR_SEND, flags: sigFlag(signalled),
		ah: dest.AH.ah, remote_qpn: C.uint32_t(dest.QPN), remote_qkey: C.uint32_t(dest.QKey)}
	return q.post("ibv_post_send(UD SEND)", data)
}

func sigFlag(signalled bool) C.int {
	if signalled {
		return C.IBV_SEND_SIGNALED
	}
	return 0
}

// post posts q.send; data (if any) is copied to C memory and sent inline.
func (q *QP) post(op string, data []byte) error {
	if q.qp == nil {
		return ErrClosed
	}
	if err := q.sendCQ.free(op); err != nil {
		return err
	}
	var rc C.int
	if data != nil {
		if len(data) > q.inline {
			return fmt.Errorf("verbs: %s: %d bytes exceed the QP's inline limit %d", op, len(data), q.inline)
		}
		if len(data) > 0 {
			C.memcpy(q.sendData, unsafe.Pointer(&data[0]), C.size_t(len(data)))
		}
		q.send.len = C.uint32_t(len(data))
		rc = C.vv_post_send_inline(q.qp, &q.send, q.sendData)
	} else {
		rc = C.vv_post_send(q.qp, &q.send)
	}
	if rc != 0 {
		return newError(op, int(rc))
	}
	return nil
}

// PostRecv posts one receive of up to length bytes at offset off of local.
// For UD, the first 40 bytes receive the GRH.
func (q *QP) PostRecv(wrID uint64, local *MR, off, length int) error {
	if q.qp == nil {
		return ErrClosed
	}
	if err := q.recvCQ.free("ibv_post_recv"); err != nil {
		return err
	}
	if off < 0 || length <= 0 || off+length > local.Len() {
		return fmt.Errorf("verbs: PostRecv range [%d,%d) outside the %d-byte MR", off, off+length, local.Len())
	}
	if rc := C.vv_post_recv(q.qp, C.uint64_t(wrID), C.uint64_t(local.Addr()+uint64(off)),
		C.uint32_t(length), C.uint32_t(local.lkey)); rc != 0 {
		return newError("ibv_post_recv", int(rc))
	}
	return nil
}

// AH is an address handle (ibv_ah): the path to one remote port for UD.
type AH struct {
	pd *PD
	ah *C.struct_ibv_ah
}

// CreateAH creates an address handle towards the remote endpoint, from the
// given local port and source GID index (ibv_create_ah). hopLimit 0 means 64.
func (p *PD) CreateAH(remote Endpoint, port, sgidIndex int, hopLimit uint8) (*AH, error) {
	if p.pd == nil {
		return nil, ErrClosed
	}
	if hopLimit == 0 {
		hopLimit = 64
	}
	var dgid [16]C.uint8_t
	for i, b := range remote.GID {
		dgid[i] = C.uint8_t(b)
	}
	global := C.int(0)
	if !remote.GID.IsZero() {
		global = 1
	}
	var en C.int
	ah := C.vv_create_ah(p.pd, &dgid[0], C.uint16_t(remote.LID), C.int(port), C.int(sgidIndex),
		global, C.int(hopLimit), &en)
	if ah == nil {
		return nil, newError("ibv_create_ah", int(en))
	}
	a := &AH{pd: p, ah: ah}
	if err := p.c.track(a); err != nil {
		C.ibv_destroy_ah(ah)
		return nil, err
	}
	return a, nil
}

// CreateAHFor creates an address handle to remote from the port and source
// GID of the UD QP q.
func (q *QP) CreateAHFor(remote Endpoint) (*AH, error) {
	return q.pd.CreateAH(remote, q.port, q.gid.Index, 0)
}

// Close destroys the address handle (ibv_destroy_ah).
func (a *AH) Close() error { return a.pd.c.release(a) }

func (a *AH) destroy() error {
	if rc := C.ibv_destroy_ah(a.ah); rc != 0 {
		return newError("ibv_destroy_ah", int(rc))
	}
	a.ah = nil
	return nil
}

// PostSendUDFrom sends length bytes at offset off of the registered region
// local to dest (UD), without copying them into the work request: the
// bytes must stay untouched until the send completes. A UD message is at
// most one path MTU.
func (q *QP) PostSendUDFrom(wrID uint64, dest UDDest, local *MR, off, length int, signalled bool) error {
	if q.typ != UD {
		return fmt.Errorf("verbs: PostSendUDFrom on a %v QP", q.typ)
	}
	if dest.AH == nil || dest.AH.ah == nil {
		return fmt.Errorf("verbs: PostSendUDFrom without an address handle")
	}
	if off < 0 || length < 0 || off+length > local.Len() {
		return fmt.Errorf("verbs: PostSendUDFrom range [%d,%d) outside the %d-byte MR", off, off+length, local.Len())
	}
	s := &q.send
	*s = C.struct_vv_send{wr_id: C.uint64_t(wrID), opcode: C.IBV_WR_SEND, flags: sigFlag(signalled),
		laddr: C.uint64_t(local.Addr() + uint64(off)), len: C.uint32_t(length), lkey: C.uint32_t(local.lkey),
		ah: dest.AH.ah, remote_qpn: C.uint32_t(dest.QPN), remote_qkey: C.uint32_t(dest.QKey)}
	return q.post("ibv_post_send(UD SEND)", nil)
}

// PathMTU returns the port's active MTU when the QP was created: the
// largest UD message.
func (q *QP) PathMTU() MTU { return q.mtu }
