package era

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vigil-hpc/vigil/ranks"
)

// ID identifies one agreement. Epoch names the context (a communicator, or
// one incarnation of the group); Seq is chosen by the caller and must grow
// in the order in which every process starts the agreements of an epoch,
// as MPI collectives are called in the same order everywhere. The garbage
// collection of Section 4 relies on that order.
type ID struct {
	Epoch uint32
	Seq   uint64
}

// String formats id as epoch/seq.
func (id ID) String() string { return fmt.Sprintf("%d/%d", id.Epoch, id.Seq) }

// Kind is the type of an ERA message.
type Kind uint8

// Message kinds of ERA Part 2.
const (
	// Up carries a contribution towards the root: UP(a, Current).
	Up Kind = 1
	// Down carries the decision away from the root: DOWN(a, Result).
	Down Kind = 2
	// ResultRequest asks for the decision or the contribution of the
	// receiver: RESULTREQUEST(a). It is sent only by a root.
	ResultRequest Kind = 3
)

// String returns the paper's name of the kind.
func (k Kind) String() string {
	switch k {
	case Up:
		return "UP"
	case Down:
		return "DOWN"
	case ResultRequest:
		return "RESULTREQUEST"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Msg is one ERA message. Up and Down carry a value (a contribution or the
// decision): the Op value, the dead and acknowledged sets and the collection
// bound. ResultRequest carries only Dead: the ranks its sender (a root)
// knows dead, which the receiver adopts (it generalizes the paper's
// "∀ r < q: S_p[r] ← dead", see Core).
//
// Messages returned by a Core may share memory with each other and with the
// decided (immutable) state of the core: treat them as read-only.
type Msg struct {
	Kind Kind
	ID   ID
	// Value is the Op value (Up, Down).
	Value []byte
	// Dead is the union of the known-dead sets of the contributors (Up),
	// the decided dead set (Down), or the sender's known-dead set
	// (ResultRequest).
	Dead ranks.Set
	// Acked is the intersection of the acknowledged sets of the
	// contributors (Up, Down); it is a subset of Dead.
	Acked ranks.Set
	// Collect is the garbage-collection bound of Section 4 (Up, Down):
	// every contributor had decided all the agreements of the epoch it had
	// started with a smaller Seq. In a Down it is agreed: each decider may
	// forget the results of the epoch's agreements below it.
	Collect uint64
}

// Wire format, version 1 (all integers little-endian or uvarint):
//
//	type byte   version<<4 | kind
//	epoch       uint32
//	seq         uint64
//	Up, Down:
//	  collect   uvarint
//	  value     uvarint length, bytes
//	  dead      set
//	  acked     byte 0: equal to dead; byte 1: a set follows
//	ResultRequest:
//	  dead      set
//
// A set is a uvarint count followed by the strictly increasing ranks as
// uvarint gaps: the first rank, then r[i] − r[i−1] − 1.
const (
	msgVersion    = 1
	msgHeaderSize = 1 + 4 + 8
)

// DecodeError is returned by UnmarshalBinary for malformed input; Field
// names the offending field, such as "msg.dead[3]".
type DecodeError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *DecodeError) Error() string { return "era: decoding " + e.Field + ": " + e.Reason }

// MarshalBinary encodes m (encoding.BinaryMarshaler).
func (m *Msg) MarshalBinary() ([]byte, error) { return m.AppendBinary(nil) }

// AppendBinary appends the encoding of m to b (encoding.BinaryAppender).
func (m *Msg) AppendBinary(b []byte) ([]byte, error) {
	switch m.Kind {
	case Up, Down:
	case ResultRequest:
		if len(m.Value) != 0 || m.Acked.Len() != 0 || m.Collect != 0 {
			return b, fmt.Errorf("era: encoding msg: a ResultRequest carries no value, acked set or collect bound")
		}
	default:
		return b, fmt.Errorf("era: encoding msg.kind: unknown kind %d", uint8(m.Kind))
	}
	b = append(b, msgVersion<<4|byte(m.Kind))
	b = binary.LittleEndian.AppendUint32(b, m.ID.Epoch)
	b = binary.LittleEndian.AppendUint64(b, m.ID.Seq)
	if m.Kind == ResultRequest {
		return appendSet(b, &m.Dead), nil
	}
	b = binary.AppendUvarint(b, m.Collect)
	b = binary.AppendUvarint(b, uint64(len(m.Value)))
	b = append(b, m.Value...)
	b = appendSet(b, &m.Dead)
	if m.Acked.Equal(m.Dead) {
		return append(b, 0), nil
	}
	b = append(b, 1)
	return appendSet(b, &m.Acked), nil
}

func appendSet(b []byte, s *ranks.Set) []byte {
	rs := s.Members()
	b = binary.AppendUvarint(b, uint64(len(rs)))
	prev := int64(-1)
	for _, r := range rs {
		b = binary.AppendUvarint(b, uint64(int64(r)-prev-1))
		prev = int64(r)
	}
	return b
}

// UnmarshalBinary decodes b into m (encoding.BinaryUnmarshaler). It never
// panics, copies what it keeps, allocates at most in proportion to len(b)
// and reports malformed input with a *DecodeError.
func (m *Msg) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	*m = Msg{}
	t, err := d.byte("msg.type")
	if err != nil {
		return err
	}
	if v := t >> 4; v != msgVersion {
		return &DecodeError{"msg.type", fmt.Sprintf("unsupported version %d", v)}
	}
	m.Kind = Kind(t & 0x0f)
	switch m.Kind {
	case Up, Down, ResultRequest:
	default:
		return &DecodeError{"msg.type", fmt.Sprintf("unknown kind %d", uint8(m.Kind))}
	}
	if m.ID.Epoch, err = d.u32("msg.id.epoch"); err != nil {
		return err
	}
	if m.ID.Seq, err = d.u64("msg.id.seq"); err != nil {
		return err
	}
	if m.Kind == ResultRequest {
		if m.Dead, err = d.set("msg.dead"); err != nil {
			return err
		}
		return d.end()
	}
	if m.Collect, err = d.uvarint("msg.collect"); err != nil {
		return err
	}
	n, err := d.uvarint("msg.value.len")
	if err != nil {
		return err
	}
	if n > uint64(len(d.b)-d.off) {
		return &DecodeError{"msg.value", fmt.Sprintf("length %d exceeds the %d bytes left", n, len(d.b)-d.off)}
	}
	if n > 0 {
		m.Value = append([]byte(nil), d.b[d.off:d.off+int(n)]...)
		d.off += int(n)
	}
	if m.Dead, err = d.set("msg.dead"); err != nil {
		return err
	}
	mode, err := d.byte("msg.acked.mode")
	if err != nil {
		return err
	}
	switch mode {
	case 0:
		m.Acked = m.Dead.Clone()
	case 1:
		if m.Acked, err = d.set("msg.acked"); err != nil {
			return err
		}
	default:
		return &DecodeError{"msg.acked.mode", fmt.Sprintf("unknown mode %d", mode)}
	}
	return d.end()
}

type decoder struct {
	b   []byte
	off int
}

func (d *decoder) short(field string, need int) error {
	return &DecodeError{field, fmt.Sprintf("truncated: need %d bytes, %d left", need, len(d.b)-d.off)}
}

func (d *decoder) byte(field string) (byte, error) {
	if d.off >= len(d.b) {
		return 0, d.short(field, 1)
	}
	d.off++
	return d.b[d.off-1], nil
}

func (d *decoder) u32(field string) (uint32, error) {
	if len(d.b)-d.off < 4 {
		return 0, d.short(field, 4)
	}
	d.off += 4
	return binary.LittleEndian.Uint32(d.b[d.off-4:]), nil
}

func (d *decoder) u64(field string) (uint64, error) {
	if len(d.b)-d.off < 8 {
		return 0, d.short(field, 8)
	}
	d.off += 8
	return binary.LittleEndian.Uint64(d.b[d.off-8:]), nil
}

func (d *decoder) uvarint(field string) (uint64, error) {
	x, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		return 0, &DecodeError{field, "truncated uvarint"}
	case n < 0:
		return 0, &DecodeError{field, "uvarint overflows 64 bits"}
	}
	d.off += n
	return x, nil
}

func (d *decoder) set(field string) (ranks.Set, error) {
	n, err := d.uvarint(field + ".count")
	if err != nil {
		return ranks.Set{}, err
	}
	if n > uint64(len(d.b)-d.off) { // every rank takes at least one byte
		return ranks.Set{}, &DecodeError{field + ".count", fmt.Sprintf("%d ranks cannot fit in the %d bytes left", n, len(d.b)-d.off)}
	}
	if n == 0 {
		return ranks.Set{}, nil
	}
	rs := make([]ranks.Rank, n)
	prev := int64(-1)
	for i := range rs {
		gap, err := d.uvarint(fmt.Sprintf("%s[%d]", field, i))
		if err != nil {
			return ranks.Set{}, err
		}
		if gap > math.MaxUint32 || prev+1+int64(gap) > math.MaxUint32 {
			return ranks.Set{}, &DecodeError{fmt.Sprintf("%s[%d]", field, i), "rank overflows uint32"}
		}
		prev += 1 + int64(gap)
		rs[i] = ranks.Rank(prev)
	}
	s, err := ranks.FromSorted(rs)
	if err != nil { // cannot happen: gaps make the ranks strictly increasing
		return ranks.Set{}, &DecodeError{field, err.Error()}
	}
	return s, nil
}

func (d *decoder) end() error {
	if d.off != len(d.b) {
		return &DecodeError{"msg", fmt.Sprintf("%d trailing bytes", len(d.b)-d.off)}
	}
	return nil
}
