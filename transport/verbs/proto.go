package verbs

import (
	"encoding/binary"
	"fmt"

	ibv "github.com/vigil-hpc/vigil/verbs"
)

// Datagram layout. Every UD datagram is one authenticated wire.Msg frame
// (job ID, sender rank and incarnation in its header, SipHash tag at its
// end) whose payload starts with the receiver's incarnation, then one packet:
//
//	to (u64 LE): the incarnation of the receiver the sender addresses
//	DATA:      kind=1 | flags | seq (u64 LE) | base (u64 LE) | ack (u64 LE) | fragment bytes
//	ACK:       kind=2 | 0     | cumulative ack (u64 LE)
//	HEARTBEAT: kind=3 | 0     | heartbeat sequence number (u64 LE, not 0)
//
// to binds the datagram to one incarnation of the receiver under the MAC:
// the reliability layer's sequence numbers start afresh with each
// incarnation, so without it a DATA packet captured in a session with a
// previous incarnation would be new to the next one. The receiver refuses
// a datagram whose to is not its own incarnation (wrong_incarnation).
//
// seq numbers the sender's packets to this receiver from 1; base is the
// lowest seq the sender still holds (everything below it was delivered or
// given up on), so a receiver waiting for a packet the sender abandoned
// skips ahead instead of stalling. ack is the cumulative ack of the other
// direction carried for free (0: nothing received yet), so that a reply
// acknowledges the request it answers without an ACK datagram. flagLast ends a message; flagControl
// marks the transport's own messages (the RC handshake), which are not
// handed to the node. HEARTBEAT is an emitter's sequence number sent as a
// datagram (before its RDMA link is up, or while it is broken).
const (
	kindData      = 1
	kindAck       = 2
	kindHeartbeat = 3

	flagLast    = 1
	flagControl = 2

	toSize     = 8
	dataHeader = 26
	ackSize    = 10
	hbSize     = 10
)

// pktHeader is a decoded packet header.
type pktHeader struct {
	kind  byte
	flags byte
	seq   uint64 // DATA: the packet's seq; ACK: the cumulative ack; HEARTBEAT: the heartbeat's
	base  uint64 // DATA only
	ack   uint64 // DATA only: the piggybacked cumulative ack (0: none)
}

// appendDatagramHeader appends the receiver's incarnation that starts every
// datagram's payload.
func appendDatagramHeader(dst []byte, to uint64) []byte {
	return binary.LittleEndian.AppendUint64(dst, to)
}

func appendData(dst []byte, flags byte, seq, base, ack uint64, frag []byte) []byte {
	dst = append(dst, kindData, flags)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.LittleEndian.AppendUint64(dst, base)
	dst = binary.LittleEndian.AppendUint64(dst, ack)
	return append(dst, frag...)
}

func appendAck(dst []byte, cum uint64) []byte {
	dst = append(dst, kindAck, 0)
	return binary.LittleEndian.AppendUint64(dst, cum)
}

func appendHeartbeatPkt(dst []byte, seq uint64) []byte {
	dst = append(dst, kindHeartbeat, 0)
	return binary.LittleEndian.AppendUint64(dst, seq)
}

// decodeDatagram splits a Msg frame payload into the receiver's
// incarnation it names, the packet header and the fragment.
func decodeDatagram(b []byte) (uint64, pktHeader, []byte, error) {
	if len(b) < toSize {
		return 0, pktHeader{}, nil, fmt.Errorf("verbs datagram: %d bytes, too short for the receiver's incarnation", len(b))
	}
	h, frag, err := decodePacket(b[toSize:])
	return binary.LittleEndian.Uint64(b), h, frag, err
}

// decodePacket splits a packet into header and fragment; errors name the
// field.
func decodePacket(b []byte) (pktHeader, []byte, error) {
	var h pktHeader
	if len(b) < 2 {
		return h, nil, fmt.Errorf("verbs datagram: %d bytes, too short for a kind", len(b))
	}
	h.kind, h.flags = b[0], b[1]
	switch h.kind {
	case kindData:
		if len(b) < dataHeader {
			return h, nil, fmt.Errorf("verbs datagram: DATA of %d bytes, header needs %d", len(b), dataHeader)
		}
		if h.flags&^(flagLast|flagControl) != 0 {
			return h, nil, fmt.Errorf("verbs datagram: DATA flags %#x unknown", h.flags)
		}
		h.seq = binary.LittleEndian.Uint64(b[2:])
		h.base = binary.LittleEndian.Uint64(b[10:])
		h.ack = binary.LittleEndian.Uint64(b[18:])
		if h.seq == 0 || h.base == 0 || h.base > h.seq {
			return h, nil, fmt.Errorf("verbs datagram: DATA seq %d base %d (want 1 ≤ base ≤ seq)", h.seq, h.base)
		}
		return h, b[dataHeader:], nil
	case kindAck:
		if len(b) != ackSize || h.flags != 0 {
			return h, nil, fmt.Errorf("verbs datagram: ACK of %d bytes flags %#x, want %d bytes flags 0", len(b), h.flags, ackSize)
		}
		h.seq = binary.LittleEndian.Uint64(b[2:])
		return h, nil, nil
	case kindHeartbeat:
		if len(b) != hbSize || h.flags != 0 {
			return h, nil, fmt.Errorf("verbs datagram: HEARTBEAT of %d bytes flags %#x, want %d bytes flags 0", len(b), h.flags, hbSize)
		}
		if h.seq = binary.LittleEndian.Uint64(b[2:]); h.seq == 0 {
			return h, nil, fmt.Errorf("verbs datagram: HEARTBEAT sequence number 0")
		}
		return h, nil, nil
	}
	return h, nil, fmt.Errorf("verbs datagram: unknown kind %d", h.kind)
}

// Control messages (flagControl) set up the RC queue pairs that carry RDMA
// heartbeat writes: the emitter sends CONNREQ with its new QP's endpoint,
// the observer creates and connects a QP to it and answers CONNACK with its
// own endpoint, the requester's QP number (to match the request) and the
// rkey of the memory window it bound over the emitter's slot word through
// that QP (0: no window; the emitter then uses the slot array's rkey from
// the bootstrap exchange).
//
// The message links (rcmsg.go) use the same exchange: MSGREQ and MSGACK as
// CONNREQ and CONNACK (rkey 0), then MSGUP as CONNACK from the requester
// (its endpoint, now connected, and the answerer's QP number), MSGCLOSE
// with the QP number of the end to drop, and RESEND with a message's RC
// seq followed by the message.
const (
	ctlConnReq   = 1
	ctlConnAck   = 2
	ctlMsgReq    = 3
	ctlMsgAck    = 4
	ctlMsgClose  = 5
	ctlMsgResend = 6
	ctlMsgUp     = 7
	// ctlMsgReqRoom is MSGREQ for a frequent partner: the answerer
	// refuses it rather than evict a link.
	ctlMsgReqRoom = 8

	endpointSize = 4 + 4 + 2 + 16
	connReqSize  = 1 + endpointSize
	connAckSize  = 1 + endpointSize + 4 + 4
	msgCloseSize = 1 + 4
	resendHeader = 1 + 8
)

// control is a decoded control message.
type control struct {
	op   byte
	ep   ibv.Endpoint // the sender's RC QP
	echo uint32       // CONNACK, MSGACK: the requester's QP number; MSGUP: the answerer's; MSGCLOSE: the QP to drop
	rkey uint32       // CONNACK: the slot word's window rkey (0: none)
	seq  uint64       // RESEND: the message's RC seq
	data []byte       // RESEND: the message (decodeControl: aliases its input)
}

func appendEndpoint(dst []byte, e ibv.Endpoint) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, e.QPN)
	dst = binary.LittleEndian.AppendUint32(dst, e.PSN)
	dst = binary.LittleEndian.AppendUint16(dst, e.LID)
	return append(dst, e.GID[:]...)
}

// append encodes c (RESEND: its header only; the message follows).
func (c control) append(dst []byte) []byte {
	dst = append(dst, c.op)
	switch c.op {
	case ctlMsgClose:
		return binary.LittleEndian.AppendUint32(dst, c.echo)
	case ctlMsgResend:
		return binary.LittleEndian.AppendUint64(dst, c.seq)
	}
	dst = appendEndpoint(dst, c.ep)
	if c.op == ctlConnAck || c.op == ctlMsgAck || c.op == ctlMsgUp {
		dst = binary.LittleEndian.AppendUint32(dst, c.echo)
		dst = binary.LittleEndian.AppendUint32(dst, c.rkey)
	}
	return dst
}

// decodeControl decodes a control message; errors name the problem.
func decodeControl(b []byte) (control, error) {
	var c control
	if len(b) < 1 {
		return c, fmt.Errorf("verbs control: empty")
	}
	c.op = b[0]
	want := 0
	switch c.op {
	case ctlConnReq, ctlMsgReq, ctlMsgReqRoom:
		want = connReqSize
	case ctlConnAck, ctlMsgAck, ctlMsgUp:
		want = connAckSize
	case ctlMsgClose:
		want = msgCloseSize
	case ctlMsgResend:
		if len(b) < resendHeader {
			return c, fmt.Errorf("verbs control: RESEND of %d bytes, header needs %d", len(b), resendHeader)
		}
		if c.seq = binary.LittleEndian.Uint64(b[1:]); c.seq == 0 {
			return c, fmt.Errorf("verbs control: RESEND of seq 0")
		}
		c.data = b[resendHeader:]
		return c, nil
	default:
		return c, fmt.Errorf("verbs control: unknown op %d", c.op)
	}
	if len(b) != want {
		return c, fmt.Errorf("verbs control: op %d of %d bytes, want %d", c.op, len(b), want)
	}
	if c.op == ctlMsgClose {
		c.echo = binary.LittleEndian.Uint32(b[1:])
		return c, nil
	}
	c.ep.QPN = binary.LittleEndian.Uint32(b[1:])
	c.ep.PSN = binary.LittleEndian.Uint32(b[5:])
	c.ep.LID = binary.LittleEndian.Uint16(b[9:])
	copy(c.ep.GID[:], b[11:27])
	if c.ep.QPN == 0 || c.ep.QPN >= 1<<24 || c.ep.PSN >= 1<<24 {
		return c, fmt.Errorf("verbs control: QP number %d or PSN %d out of range", c.ep.QPN, c.ep.PSN)
	}
	if c.op == ctlConnAck || c.op == ctlMsgAck || c.op == ctlMsgUp {
		c.echo = binary.LittleEndian.Uint32(b[27:])
		c.rkey = binary.LittleEndian.Uint32(b[31:])
	}
	return c, nil
}
