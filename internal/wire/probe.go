package wire

import "encoding/binary"

// Message types of the block mending (hb.Ring with RingConfig.Probe).
const (
	TypeProbe MsgType = 7
	TypeAlive MsgType = 8
)

// Probe asks a predecessor of a dead emitter whether it is alive: the
// observer mending the ring around a dead block probes the next ranks at
// once instead of one grace period after another. Round identifies the
// probe round; the answer repeats it.
type Probe struct {
	Round uint64
}

// Alive answers a Probe of the same Round.
type Alive struct {
	Round uint64
}

// Type implements Message.
func (*Probe) Type() MsgType { return TypeProbe }

// Type implements Message.
func (*Alive) Type() MsgType { return TypeAlive }

// AppendTo encodes: type, round (uvarint).
func (m *Probe) AppendTo(dst []byte) []byte {
	return binary.AppendUvarint(append(dst, byte(TypeProbe)), m.Round)
}

// AppendTo encodes: type, round (uvarint).
func (m *Alive) AppendTo(dst []byte) []byte {
	return binary.AppendUvarint(append(dst, byte(TypeAlive)), m.Round)
}
