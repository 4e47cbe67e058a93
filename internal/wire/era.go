package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/ranks"
)

// ERA message encoding, version 1 (all integers little-endian or uvarint).
// It encodes era.Msg, the data of package era's protocol; Agree carries it
// between nodes.
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
//
// The encoding lives here rather than in package era so that era stays a
// pure protocol core: wire imports era (for era.Msg), never the reverse.
const (
	eraMsgVersion    = 1
	eraMsgHeaderSize = 1 + 4 + 8
)

// AppendEraMsg appends the encoding of m to dst. A message era never builds
// (an unknown kind, or a ResultRequest with a value, an acked set or a
// collect bound) is not encoded: AppendEraMsg returns dst unchanged and an
// *Error naming the field.
func AppendEraMsg(dst []byte, m *era.Msg) ([]byte, error) {
	switch m.Kind {
	case era.Up, era.Down:
	case era.ResultRequest:
		if len(m.Value) != 0 || m.Acked.Len() != 0 || m.Collect != 0 {
			return dst, errf(ReasonBadPayload, "msg", "a ResultRequest carries no value, acked set or collect bound")
		}
	default:
		return dst, errf(ReasonBadType, "msg.kind", "unknown kind %d", uint8(m.Kind))
	}
	b := append(dst, eraMsgVersion<<4|byte(m.Kind))
	b = binary.LittleEndian.AppendUint32(b, m.ID.Epoch)
	b = binary.LittleEndian.AppendUint64(b, m.ID.Seq)
	if m.Kind == era.ResultRequest {
		return appendEraSet(b, &m.Dead), nil
	}
	b = binary.AppendUvarint(b, m.Collect)
	b = binary.AppendUvarint(b, uint64(len(m.Value)))
	b = append(b, m.Value...)
	b = appendEraSet(b, &m.Dead)
	if m.Acked.Equal(m.Dead) {
		return append(b, 0), nil
	}
	b = append(b, 1)
	return appendEraSet(b, &m.Acked), nil
}

func appendEraSet(b []byte, s *ranks.Set) []byte {
	rs := s.Members()
	b = binary.AppendUvarint(b, uint64(len(rs)))
	prev := int64(-1)
	for _, r := range rs {
		b = binary.AppendUvarint(b, uint64(int64(r)-prev-1))
		prev = int64(r)
	}
	return b
}

// DecodeEraMsg decodes the ERA message occupying all of b. It never
// panics, copies what it keeps, allocates at most in proportion to len(b)
// and reports malformed input with an *Error naming the field, such as
// "msg.dead[3]" (reason ReasonTruncated when the input ends inside a
// field, ReasonBadPayload otherwise). It accepts non-minimal uvarints;
// Agree, which requires the canonical encoding, checks that on its own.
func DecodeEraMsg(b []byte) (era.Msg, error) {
	m, err := decodeEraMsg(b)
	if err != nil {
		return era.Msg{}, err
	}
	return m, nil
}

// decodeEraMsg is DecodeEraMsg with a typed error (nil on success).
func decodeEraMsg(b []byte) (era.Msg, *Error) {
	var m era.Msg
	d := eraDecoder{b: b}
	t, err := d.byte1("msg.type")
	if err != nil {
		return era.Msg{}, err
	}
	if v := t >> 4; v != eraMsgVersion {
		return era.Msg{}, eraErr("msg.type", fmt.Sprintf("unsupported version %d", v))
	}
	m.Kind = era.Kind(t & 0x0f)
	switch m.Kind {
	case era.Up, era.Down, era.ResultRequest:
	default:
		return era.Msg{}, eraErr("msg.type", fmt.Sprintf("unknown kind %d", uint8(m.Kind)))
	}
	if m.ID.Epoch, err = d.u32("msg.id.epoch"); err != nil {
		return era.Msg{}, err
	}
	if m.ID.Seq, err = d.u64("msg.id.seq"); err != nil {
		return era.Msg{}, err
	}
	if m.Kind == era.ResultRequest {
		if m.Dead, err = d.set("msg.dead"); err != nil {
			return era.Msg{}, err
		}
		if err := d.end(); err != nil {
			return era.Msg{}, err
		}
		return m, nil
	}
	if m.Collect, err = d.uvarint("msg.collect"); err != nil {
		return era.Msg{}, err
	}
	n, err := d.uvarint("msg.value.len")
	if err != nil {
		return era.Msg{}, err
	}
	if n > uint64(len(d.b)-d.off) {
		return era.Msg{}, eraErr("msg.value", fmt.Sprintf("length %d exceeds the %d bytes left", n, len(d.b)-d.off))
	}
	if n > 0 {
		m.Value = append([]byte(nil), d.b[d.off:d.off+int(n)]...)
		d.off += int(n)
	}
	if m.Dead, err = d.set("msg.dead"); err != nil {
		return era.Msg{}, err
	}
	mode, err := d.byte1("msg.acked.mode")
	if err != nil {
		return era.Msg{}, err
	}
	switch mode {
	case 0:
		m.Acked = m.Dead.Clone()
	case 1:
		if m.Acked, err = d.set("msg.acked"); err != nil {
			return era.Msg{}, err
		}
	default:
		return era.Msg{}, eraErr("msg.acked.mode", fmt.Sprintf("unknown mode %d", mode))
	}
	if err := d.end(); err != nil {
		return era.Msg{}, err
	}
	return m, nil
}

// eraDecoder reads the fields of an ERA message. Unlike decoder it reports
// each error where it occurs and accepts non-minimal uvarints (the format
// of package era, kept as it was).
type eraDecoder struct {
	b   []byte
	off int
}

// eraErr is a malformed ERA message; the reason is ReasonBadPayload.
func eraErr(field, detail string) *Error {
	return &Error{reason: ReasonBadPayload, Field: field, Detail: detail}
}

func (d *eraDecoder) short(field string, need int) *Error {
	return &Error{reason: ReasonTruncated, Field: field,
		Detail: fmt.Sprintf("truncated: need %d bytes, %d left", need, len(d.b)-d.off)}
}

func (d *eraDecoder) byte1(field string) (byte, *Error) {
	if d.off >= len(d.b) {
		return 0, d.short(field, 1)
	}
	d.off++
	return d.b[d.off-1], nil
}

func (d *eraDecoder) u32(field string) (uint32, *Error) {
	if len(d.b)-d.off < 4 {
		return 0, d.short(field, 4)
	}
	d.off += 4
	return binary.LittleEndian.Uint32(d.b[d.off-4:]), nil
}

func (d *eraDecoder) u64(field string) (uint64, *Error) {
	if len(d.b)-d.off < 8 {
		return 0, d.short(field, 8)
	}
	d.off += 8
	return binary.LittleEndian.Uint64(d.b[d.off-8:]), nil
}

func (d *eraDecoder) uvarint(field string) (uint64, *Error) {
	x, n := binary.Uvarint(d.b[d.off:])
	switch {
	case n == 0:
		return 0, &Error{reason: ReasonTruncated, Field: field, Detail: "truncated uvarint"}
	case n < 0:
		return 0, eraErr(field, "uvarint overflows 64 bits")
	}
	d.off += n
	return x, nil
}

func (d *eraDecoder) set(field string) (ranks.Set, *Error) {
	n, err := d.uvarint(field + ".count")
	if err != nil {
		return ranks.Set{}, err
	}
	if n > uint64(len(d.b)-d.off) { // every rank takes at least one byte
		return ranks.Set{}, eraErr(field+".count", fmt.Sprintf("%d ranks cannot fit in the %d bytes left", n, len(d.b)-d.off))
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
			return ranks.Set{}, eraErr(fmt.Sprintf("%s[%d]", field, i), "rank overflows uint32")
		}
		prev += 1 + int64(gap)
		rs[i] = ranks.Rank(prev)
	}
	s, ferr := ranks.FromSorted(rs)
	if ferr != nil { // cannot happen: gaps make the ranks strictly increasing
		return ranks.Set{}, eraErr(field, ferr.Error())
	}
	return s, nil
}

func (d *eraDecoder) end() *Error {
	if d.off != len(d.b) {
		return eraErr("msg", fmt.Sprintf("%d trailing bytes", len(d.b)-d.off))
	}
	return nil
}
