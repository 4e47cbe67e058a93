package wire

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
)

// MsgType is the first byte of a protocol message.
type MsgType uint8

// Message types.
const (
	TypeNewObserver MsgType = 1
	TypeLeave       MsgType = 2
	TypeBcast       MsgType = 3
	TypeEvicted     MsgType = 4
)

// Message is a protocol message carried in a Msg frame: *NewObserver,
// *Leave, *Bcast, *Evicted, *Agree, *Sync, *Probe or *Alive.
type Message interface {
	// Type returns the message's type byte.
	Type() MsgType
	// AppendTo appends the message's encoding, type byte first.
	AppendTo(dst []byte) []byte
}

// NewObserver tells an emitter to send its heartbeats to Observer from now
// on (task T4).
type NewObserver struct {
	Observer ranks.Rank
}

// Leave is sent by a departing Rank to its observer, naming Emitter, the
// rank the observer should observe next.
type Leave struct {
	Rank    ranks.Rank
	Emitter ranks.Rank
}

// Bcast carries one broadcast.
type Bcast struct {
	bcast.Message
}

// Evicted tells Rank that the sender holds it dead: a rank that was
// declared dead (it was paused, say) and resumes must stop (fail-stop), or it
// would go on to suspect live ranks. Live is how many ranks the sender
// holds alive, itself included: between two ranks that hold each other
// dead (the two sides of a healed partition), the larger view wins.
type Evicted struct {
	Rank ranks.Rank
	Live uint32
}

// Type implements Message.
func (*Evicted) Type() MsgType { return TypeEvicted }

// AppendTo encodes: type, rank, live (uvarints).
func (m *Evicted) AppendTo(dst []byte) []byte {
	dst = append(dst, byte(TypeEvicted))
	dst = binary.AppendUvarint(dst, uint64(m.Rank))
	return binary.AppendUvarint(dst, uint64(m.Live))
}

// Type implements Message.
func (*NewObserver) Type() MsgType { return TypeNewObserver }

// Type implements Message.
func (*Leave) Type() MsgType { return TypeLeave }

// Type implements Message.
func (*Bcast) Type() MsgType { return TypeBcast }

// AppendTo encodes: type, observer (uvarint).
func (m *NewObserver) AppendTo(dst []byte) []byte {
	dst = append(dst, byte(TypeNewObserver))
	return binary.AppendUvarint(dst, uint64(m.Observer))
}

// AppendTo encodes: type, rank, emitter (uvarints).
func (m *Leave) AppendTo(dst []byte) []byte {
	dst = append(dst, byte(TypeLeave))
	dst = binary.AppendUvarint(dst, uint64(m.Rank))
	return binary.AppendUvarint(dst, uint64(m.Emitter))
}

// AppendTo encodes: type, source, seq, kind byte, detector, detected-at
// (8 bytes little-endian, two's complement), the dead count and ranks
// (uvarints, in the order given), then D's count, first rank and the
// strictly positive deltas between successive ranks (uvarints); a Note
// goes on with its payload's length (uvarint) and bytes. Every broadcast
// ends with its hop's phase byte (0 for an overlay's message); a corrected
// gossip's copy goes on with the step, the count and ranks of Known
// (uvarints).
func (m *Bcast) AppendTo(dst []byte) []byte {
	dst = append(dst, byte(TypeBcast))
	dst = binary.AppendUvarint(dst, uint64(m.ID.Source))
	dst = binary.AppendUvarint(dst, m.ID.Seq)
	dst = append(dst, byte(m.Kind))
	dst = binary.AppendUvarint(dst, uint64(m.Detector))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(m.DetectedAt))
	dst = binary.AppendUvarint(dst, uint64(len(m.Dead)))
	for _, r := range m.Dead {
		dst = binary.AppendUvarint(dst, uint64(r))
	}
	d := m.D.Members()
	dst = binary.AppendUvarint(dst, uint64(len(d)))
	var prev ranks.Rank
	for i, r := range d {
		if i == 0 {
			dst = binary.AppendUvarint(dst, uint64(r))
		} else {
			dst = binary.AppendUvarint(dst, uint64(r-prev))
		}
		prev = r
	}
	if m.Kind == bcast.Note {
		dst = binary.AppendUvarint(dst, uint64(len(m.Payload)))
		dst = append(dst, m.Payload...)
	}
	dst = append(dst, byte(m.Hop.Phase))
	if h := &m.Hop; h.Phase != bcast.PhaseNone {
		dst = binary.AppendUvarint(dst, uint64(h.Step))
		dst = binary.AppendUvarint(dst, uint64(len(h.Known)))
		for _, r := range h.Known {
			dst = binary.AppendUvarint(dst, uint64(r))
		}
	}
	return dst
}

// AppendMessage appends m's encoding to dst.
func AppendMessage(dst []byte, m Message) []byte { return m.AppendTo(dst) }

// PeekType returns the type byte of an encoded message without decoding it.
func PeekType(b []byte) (MsgType, error) {
	if len(b) == 0 {
		return 0, errf(ReasonTruncated, "message.type", "empty message")
	}
	t := MsgType(b[0])
	if t < TypeNewObserver || t > TypeAlive {
		return 0, errf(ReasonBadType, "message.type", "unknown message type %d", b[0])
	}
	return t, nil
}

// decoder reads fields from a message, remembering the first error.
type decoder struct {
	b   []byte
	n   int // rank bound, 0 for none
	err *Error
}

func (d *decoder) fail(reason, field, format string, args ...any) {
	if d.err == nil {
		d.err = errf(reason, field, format, args...)
	}
}

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.b)
	switch {
	case k == 0:
		d.fail(ReasonTruncated, field, "input ends inside the field")
		return 0
	case k < 0:
		d.fail(ReasonBadPayload, field, "uvarint overflows 64 bits")
		return 0
	case k != uvarintLen(v):
		d.fail(ReasonBadPayload, field, "non-minimal uvarint")
		return 0
	}
	d.b = d.b[k:]
	return v
}

// rank reads a rank, checked against the rank bound.
func (d *decoder) rank(field string) ranks.Rank {
	v := d.uvarint(field)
	if d.err != nil {
		return 0
	}
	return d.checkRank(field, v)
}

func (d *decoder) checkRank(field string, v uint64) ranks.Rank {
	if v > math.MaxUint32 {
		d.fail(ReasonBadPayload, field, "rank %d overflows 32 bits", v)
		return 0
	}
	if d.n > 0 && v >= uint64(d.n) {
		d.fail(ReasonUnknownRank, field, "rank %d not below %d", v, d.n)
		return 0
	}
	return ranks.Rank(v)
}

// fixed takes the next n bytes of field (nil, and the error recorded, when
// the input ends inside it).
func (d *decoder) fixed(field string, n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.fail(ReasonTruncated, field, "input ends inside the field")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte1(field string) byte {
	if b := d.fixed(field, 1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) uint64le(field string) uint64 {
	if b := d.fixed(field, 8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// count reads a list length; every element takes at least one byte, so a
// count above the remaining bytes is rejected before anything is allocated.
func (d *decoder) count(field string) int {
	v := d.uvarint(field)
	if d.err != nil {
		return 0
	}
	if v > uint64(len(d.b)) {
		d.fail(ReasonBadPayload, field, "count %d exceeds the %d remaining bytes", v, len(d.b))
		return 0
	}
	return int(v)
}

// DecodeMessage decodes one message occupying all of b. If n > 0, every
// rank in it must be below n. Errors are *Error values naming the field.
// The result does not alias b.
func DecodeMessage(b []byte, n int) (Message, error) {
	t, err := PeekType(b)
	if err != nil {
		return nil, err
	}
	d := &decoder{b: b[1:], n: n}
	var m Message
	switch t {
	case TypeNewObserver:
		m = &NewObserver{Observer: d.rank("newobserver.observer")}
	case TypeLeave:
		l := &Leave{}
		l.Rank = d.rank("leave.rank")
		l.Emitter = d.rank("leave.emitter")
		m = l
	case TypeBcast:
		m = d.bcast()
	case TypeEvicted:
		e := &Evicted{Rank: d.rank("evicted.rank")}
		live := d.uvarint("evicted.live")
		if d.err == nil && (live == 0 || (n > 0 && live > uint64(n)) || live > math.MaxUint32) {
			d.fail(ReasonBadPayload, "evicted.live", "%d live ranks, want 1 to the job's size", live)
		}
		e.Live = uint32(live)
		m = e
	case TypeAgree:
		if a := d.agree(); a != nil {
			m = a
		}
	case TypeSync:
		if s := d.sync(); s != nil {
			m = s
		}
	case TypeProbe:
		m = &Probe{Round: d.uvarint("probe.round")}
	case TypeAlive:
		m = &Alive{Round: d.uvarint("alive.round")}
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(ReasonBadPayload, "message", "%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

func (d *decoder) bcast() *Bcast {
	m := &Bcast{}
	m.ID.Source = d.rank("bcast.source")
	m.ID.Seq = d.uvarint("bcast.seq")
	m.Kind = bcast.Kind(d.byte1("bcast.kind"))
	if d.err == nil && m.Kind != bcast.Failed && m.Kind != bcast.Left && m.Kind != bcast.Note {
		d.fail(ReasonBadType, "bcast.kind", "unknown kind %d", m.Kind)
	}
	m.Detector = d.rank("bcast.detector")
	m.DetectedAt = int64(d.uint64le("bcast.detected_at"))
	if c := d.count("bcast.dead"); c > 0 {
		m.Dead = make([]ranks.Rank, c)
		for i := range m.Dead {
			m.Dead[i] = d.rank("bcast.dead")
		}
	}
	if c := d.count("bcast.d"); c > 0 {
		rs := make([]ranks.Rank, c)
		var prev uint64
		for i := range rs {
			v := d.uvarint("bcast.d")
			if d.err != nil {
				break
			}
			if i > 0 {
				if v == 0 {
					d.fail(ReasonBadPayload, "bcast.d", "not strictly increasing at index %d", i)
					break
				}
				v += prev
				if v < prev { // wrapped
					v = math.MaxUint64
				}
			}
			rs[i] = d.checkRank("bcast.d", v)
			prev = v
		}
		if d.err == nil {
			s, err := ranks.FromSorted(rs)
			if err != nil { // unreachable: deltas are positive
				d.fail(ReasonBadPayload, "bcast.d", "%v", err)
			}
			m.D = s
		}
	}
	if m.Kind == bcast.Note {
		c := d.count("bcast.payload")
		if c > bcast.MaxPayload {
			d.fail(ReasonBadPayload, "bcast.payload", "%d bytes, at most %d", c, bcast.MaxPayload)
		}
		if p := d.fixed("bcast.payload", c); len(p) > 0 {
			m.Payload = append([]byte(nil), p...)
		}
	}
	d.hop(&m.Hop)
	return m
}

// hop decodes a corrected gossip's Hop (see Bcast.AppendTo).
func (d *decoder) hop(h *bcast.Hop) {
	h.Phase = bcast.Phase(d.byte1("bcast.hop.phase"))
	if d.err == nil && h.Phase > bcast.PhaseSOS {
		d.fail(ReasonBadType, "bcast.hop.phase", "unknown phase %d", h.Phase)
	}
	if d.err != nil || h.Phase == bcast.PhaseNone {
		return
	}
	step := d.uvarint("bcast.hop.step")
	if d.err == nil && step > math.MaxUint32 {
		d.fail(ReasonBadPayload, "bcast.hop.step", "step %d does not fit 32 bits", step)
	}
	h.Step = uint32(step)
	c := d.count("bcast.hop.known")
	if c > bcast.MaxF+1 {
		d.fail(ReasonBadPayload, "bcast.hop.known", "%d ranks, at most %d", c, bcast.MaxF+1)
	}
	if d.err != nil || c == 0 {
		return
	}
	h.Known = make([]ranks.Rank, c)
	for i := range h.Known {
		h.Known[i] = d.rank("bcast.hop.known")
	}
}
