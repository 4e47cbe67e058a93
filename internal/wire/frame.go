package wire

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"io"

	"github.com/dchest/siphash"

	"github.com/vigil-hpc/vigil/ranks"
)

// Frame layout constants.
const (
	// Version is the frame (and message) format version.
	Version = 2
	// VersionSipHash is the version byte of format Version frames whose
	// tags are SipHash-2-4-128 (Params.MAC = MACSipHash).
	VersionSipHash = 0x80 | Version
	// HeaderSize is the size of the fixed frame header.
	HeaderSize = 28
	// TagSize is the size of the truncated HMAC-SHA256 tag ending a frame.
	TagSize = 16
	// DefaultMaxPayload bounds a frame's payload unless Params says otherwise.
	DefaultMaxPayload = 1 << 20
	// HeartbeatPayloadSize is the size of a heartbeat's payload (Beat).
	HeartbeatPayloadSize = 4 + 8 + 8
	// HeartbeatSeqAt is where a heartbeat frame's sequence number
	// (little-endian) starts: the payload's last 8 bytes.
	HeartbeatSeqAt = HeaderSize + 12
	// HeartbeatFrameSize is the size of a whole heartbeat frame.
	HeartbeatFrameSize = HeaderSize + HeartbeatPayloadSize + TagSize
	// HeaderJobAt, HeaderSenderAt and HeaderIncarnationAt are where a
	// frame's job ID, sender rank and sender incarnation (little-endian)
	// start in its header, after the magic "VG", the version and the type.
	HeaderJobAt         = 4
	HeaderSenderAt      = 12
	HeaderIncarnationAt = 16
	// MinKeyLen is the shortest job key accepted.
	MinKeyLen = 16
	// ChallengeSize is the size of a connection's challenge (Bind).
	ChallengeSize = 16
)

const magic0, magic1 = 'V', 'G'

// Type is a frame type.
type Type uint8

// Frame types.
const (
	// Hello opens a connection: it names the sender (in the header) and the
	// rank it meant to reach (payload, see AppendHello).
	Hello Type = 1
	// Msg carries one protocol message (see AppendMessage).
	Msg Type = 2
	// Heartbeat carries an emitter's sequence number, bound to one
	// incarnation of its receiver (Beat).
	Heartbeat Type = 3
	// Bye announces an orderly close of the connection (empty payload).
	Bye Type = 4
)

func (t Type) valid() bool { return t >= Hello && t <= Bye }

// String returns the type's name.
func (t Type) String() string {
	switch t {
	case Hello:
		return "hello"
	case Msg:
		return "msg"
	case Heartbeat:
		return "heartbeat"
	case Bye:
		return "bye"
	}
	return "unknown"
}

// Frame is one decoded, authenticated frame.
type Frame struct {
	Type        Type
	JobID       uint64
	Sender      ranks.Rank
	Incarnation uint64
	// Payload aliases the decoder's input or buffer: see Decode and
	// ReadFrame for how long it stays valid.
	Payload []byte
}

// Params configures a Codec.
type Params struct {
	// JobID is written into every frame and required of every frame read.
	JobID uint64
	// Key is the job's shared secret (at least MinKeyLen bytes).
	Key []byte
	// Rank and Incarnation identify this process in the frames it encodes.
	Rank        ranks.Rank
	Incarnation uint64
	// N is the number of ranks; frames from a sender ≥ N are rejected.
	// Zero disables the check.
	N int
	// MaxPayload bounds payloads both ways; zero means DefaultMaxPayload.
	MaxPayload int
	// MAC is the tag's function (zero: MACHMACSHA256). Both ends of a
	// connection or datagram path must use the same one: a frame with the
	// other one fails with ReasonBadVersion.
	MAC MAC
}

// MAC is a frame tag's function.
type MAC uint8

// Tag functions.
const (
	// MACHMACSHA256 tags with HMAC-SHA256 under the job key, truncated to
	// TagSize bytes (version byte Version).
	MACHMACSHA256 MAC = iota
	// MACSipHash tags with SipHash-2-4-128 under a 128-bit key derived
	// from the job key (version byte VersionSipHash): a small frame's tag
	// and check cost half of HMAC-SHA256's on the host and a sixth under
	// emulation (transport/verbs BenchmarkDatagramMAC), for datagram paths
	// where the tag is a large part of a message's cost (the verbs
	// transport's UD datagrams).
	MACSipHash
)

// newMAC returns the keyed tag function mac and the version byte of its
// frames.
func newMAC(mac MAC, key []byte) (hash.Hash, byte) {
	if mac == MACSipHash {
		return siphash.New128(sipKey(key)), VersionSipHash
	}
	return hmac.New(sha256.New, key), Version
}

// sipKey derives SipHash's 128-bit key from the job key, so that the two
// tag functions never share key material.
func sipKey(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("vigil wire: SipHash-2-4-128 frame tag key"))
	return m.Sum(nil)[:16]
}

// Codec encodes and checks the frames of one connection. It is not safe
// for concurrent use: each connection (or writer) owns one.
type Codec struct {
	p   Params
	mac hash.Hash
	ver byte // the version byte of this codec's frames
	sum [sha256.Size]byte
	hdr [HeaderSize]byte
	buf []byte // ReadFrame's payload+tag buffer, reused
	// readLimit, if positive, bounds the payloads read below MaxPayload
	// (SetReadLimit).
	readLimit int

	// Bind's connection: its challenge and the index of the next frame.
	bound bool
	ch    [ChallengeSize]byte
	idx   uint64
}

// Challenge is a connection's random challenge: the accepting end sends
// it first, and both ends Bind their codecs to it.
type Challenge [ChallengeSize]byte

// NewChallenge returns a fresh random challenge.
func NewChallenge() Challenge {
	var c Challenge
	_, _ = rand.Read(c[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return c
}

// SetReadLimit bounds the payload of the frames Decode and ReadFrame
// accept to n bytes (0: MaxPayload again), for instance while a
// connection has not authenticated: a stranger's frame then costs at most
// n bytes, whatever length it announces.
func (c *Codec) SetReadLimit(n int) { c.readLimit = n }

// Bind ties the codec to one connection and one direction of it: from
// now on every frame's tag also covers ch and the frame's index since Bind
// (0, 1, 2, …), so a frame replayed from another connection, or repeated,
// dropped or reordered on this one, fails its check (ReasonBadTag). Bind
// again for a new connection.
func (c *Codec) Bind(ch Challenge) {
	c.bound, c.ch, c.idx = true, ch, 0
}

// tag computes the tag of the frame hdr||payload at the codec's index.
func (c *Codec) tag(hdr, payload []byte) []byte {
	if !c.bound {
		return tag(c.mac, &c.sum, hdr, payload)
	}
	var pre [ChallengeSize + 8]byte
	copy(pre[:], c.ch[:])
	binary.LittleEndian.PutUint64(pre[ChallengeSize:], c.idx)
	c.mac.Reset()
	c.mac.Write(pre[:])
	c.mac.Write(hdr)
	c.mac.Write(payload)
	return c.mac.Sum(c.sum[:0])[:TagSize]
}

// NewCodec returns a Codec for p. It panics if the key is shorter than
// MinKeyLen: transports validate their configuration first.
func NewCodec(p Params) *Codec {
	if len(p.Key) < MinKeyLen {
		panic("wire: key shorter than MinKeyLen")
	}
	if p.MaxPayload <= 0 {
		p.MaxPayload = DefaultMaxPayload
	}
	p.Key = append([]byte(nil), p.Key...)
	c := &Codec{p: p}
	c.mac, c.ver = newMAC(p.MAC, p.Key)
	return c
}

// MaxPayload returns the payload bound in force.
func (c *Codec) MaxPayload() int { return c.p.MaxPayload }

func putHeader(b []byte, ver byte, p *Params, t Type, n int) {
	b[0], b[1], b[2], b[3] = magic0, magic1, ver, byte(t)
	binary.LittleEndian.PutUint64(b[HeaderJobAt:], p.JobID)
	binary.LittleEndian.PutUint32(b[HeaderSenderAt:], p.Rank)
	binary.LittleEndian.PutUint64(b[HeaderIncarnationAt:], p.Incarnation)
	binary.LittleEndian.PutUint32(b[24:], uint32(n))
}

// tag computes the tag of header||payload into c.sum and returns its first
// TagSize bytes. It does not allocate.
func tag(mac hash.Hash, sum *[sha256.Size]byte, hdr, payload []byte) []byte {
	mac.Reset()
	mac.Write(hdr)
	mac.Write(payload)
	return mac.Sum(sum[:0])[:TagSize]
}

// Append appends the frame of type t carrying payload to dst. It fails
// with ErrTooLarge or for an unknown type.
func (c *Codec) Append(dst []byte, t Type, payload []byte) ([]byte, error) {
	if !t.valid() {
		return dst, errf(ReasonBadType, "", "unknown frame type %d", t)
	}
	if len(payload) > c.p.MaxPayload {
		return dst, ErrTooLarge
	}
	putHeader(c.hdr[:], c.ver, &c.p, t, len(payload))
	dst = append(dst, c.hdr[:]...)
	dst = append(dst, payload...)
	dst = append(dst, c.tag(c.hdr[:], payload)...)
	c.idx++
	return dst, nil
}

// ErrTooLarge is returned by Append for a payload above the maximum.
var ErrTooLarge = errors.New("wire: payload too large")

// checkHeader validates a header and returns the frame it announces
// (without payload) and the payload length.
func (c *Codec) checkHeader(h []byte) (Frame, int, error) {
	if h[0] != magic0 || h[1] != magic1 {
		return Frame{}, 0, errf(ReasonBadMagic, "", "bad magic %#x %#x", h[0], h[1])
	}
	if h[2] != c.ver {
		return Frame{}, 0, errf(ReasonBadVersion, "", "unsupported version %d", h[2])
	}
	f := Frame{
		Type:        Type(h[3]),
		JobID:       binary.LittleEndian.Uint64(h[4:]),
		Sender:      binary.LittleEndian.Uint32(h[12:]),
		Incarnation: binary.LittleEndian.Uint64(h[16:]),
	}
	if !f.Type.valid() {
		return Frame{}, 0, errf(ReasonBadType, "", "unknown frame type %d", h[3])
	}
	if f.JobID != c.p.JobID {
		return Frame{}, 0, errf(ReasonForeignJob, "", "job %d, want %d", f.JobID, c.p.JobID)
	}
	if c.p.N > 0 && int64(f.Sender) >= int64(c.p.N) {
		return Frame{}, 0, errf(ReasonUnknownRank, "", "sender rank %d not below %d", f.Sender, c.p.N)
	}
	n, most := binary.LittleEndian.Uint32(h[24:]), c.p.MaxPayload
	if c.readLimit > 0 {
		most = min(most, c.readLimit)
	}
	if uint64(n) > uint64(most) {
		return Frame{}, 0, errf(ReasonTooLarge, "", "payload length %d above %d", n, most)
	}
	return f, int(n), nil
}

func (c *Codec) verify(hdr, payload, got []byte) error {
	if !hmac.Equal(c.tag(hdr, payload), got) {
		if c.bound {
			return errf(ReasonBadTag, "", "authentication failed (frame %d of the connection)", c.idx)
		}
		return errf(ReasonBadTag, "", "authentication failed")
	}
	c.idx++
	return nil
}

// Decode checks and decodes the frame at the start of b and returns it
// with the number of bytes it used. The payload aliases b. An input
// shorter than the frame it announces fails with ReasonTruncated.
func (c *Codec) Decode(b []byte) (Frame, int, error) {
	if len(b) < HeaderSize {
		return Frame{}, 0, errf(ReasonTruncated, "", "%d bytes, header needs %d", len(b), HeaderSize)
	}
	f, n, err := c.checkHeader(b[:HeaderSize])
	if err != nil {
		return Frame{}, 0, err
	}
	end := HeaderSize + n + TagSize
	if len(b) < end {
		return Frame{}, 0, errf(ReasonTruncated, "", "%d bytes, frame needs %d", len(b), end)
	}
	f.Payload = b[HeaderSize : HeaderSize+n : HeaderSize+n]
	if err := c.verify(b[:HeaderSize], f.Payload, b[HeaderSize+n:end]); err != nil {
		return Frame{}, 0, err
	}
	return f, end, nil
}

// ReadFrame reads, checks and decodes the next frame from r (which should
// be buffered). The payload stays valid until the next call. It returns
// io.EOF if r ends cleanly between frames, an *Error with ReasonTruncated
// if it ends inside one, and r's other errors as they are. The buffer
// grows with the bytes actually received, not with the declared length.
func (c *Codec) ReadFrame(r io.Reader) (Frame, error) {
	if _, err := io.ReadFull(r, c.hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return Frame{}, errf(ReasonTruncated, "", "stream ended inside a header")
		}
		return Frame{}, err
	}
	f, n, err := c.checkHeader(c.hdr[:])
	if err != nil {
		return Frame{}, err
	}
	need := n + TagSize
	b := c.buf[:0]
	for len(b) < need {
		// Grow at most by doubling what has arrived, so a lying length
		// costs memory in proportion to the bytes really sent.
		step := min(need-len(b), max(len(b), 4096))
		if cap(b)-len(b) < step {
			nb := make([]byte, len(b), len(b)+step)
			copy(nb, b)
			b = nb
		}
		m, err := io.ReadFull(r, b[len(b):len(b)+step])
		b = b[:len(b)+m]
		if err != nil {
			c.buf = b[:0]
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return Frame{}, errf(ReasonTruncated, "", "stream ended inside a frame")
			}
			return Frame{}, err
		}
	}
	c.buf = b[:0]
	f.Payload = b[:n:n]
	if err := c.verify(c.hdr[:], f.Payload, b[n:need]); err != nil {
		return Frame{}, err
	}
	return f, nil
}

// HeartbeatFrame is a pre-encoded heartbeat frame rewritten in place for
// each sequence number: Encode does not allocate. It has its own HMAC
// state (the same function as the Codec that made it), independent of it.
// Its receiver is rank 0 of incarnation 0 until Bind.
type HeartbeatFrame struct {
	mac hash.Hash
	sum [sha256.Size]byte
	b   [HeartbeatFrameSize]byte
}

// NewHeartbeatFrame returns a heartbeat frame from this codec's sender.
func (c *Codec) NewHeartbeatFrame() *HeartbeatFrame {
	h := &HeartbeatFrame{}
	h.mac, _ = newMAC(c.p.MAC, c.p.Key)
	putHeader(h.b[:HeaderSize], c.ver, &c.p, Heartbeat, HeartbeatPayloadSize)
	return h
}

// Bind addresses the next frames to incarnation inc of rank to.
func (h *HeartbeatFrame) Bind(to ranks.Rank, inc uint64) {
	binary.LittleEndian.PutUint32(h.b[HeaderSize:], to)
	binary.LittleEndian.PutUint64(h.b[HeaderSize+4:], inc)
}

// Encode writes seq and the new tag into the frame and returns the whole
// frame, valid until the next call.
func (h *HeartbeatFrame) Encode(seq uint64) []byte {
	binary.LittleEndian.PutUint64(h.b[HeartbeatSeqAt:], seq)
	end := HeaderSize + HeartbeatPayloadSize
	copy(h.b[end:], tag(h.mac, &h.sum, h.b[:HeaderSize], h.b[HeaderSize:end]))
	return h.b[:]
}

// Beat is a heartbeat's payload: the emitter's sequence number, which
// must grow, and the receiver it is meant for, by rank and incarnation,
// all under the frame's tag with the emitter's incarnation in its header.
// A heartbeat captured on its way to one observer is thus refused by any
// other rank and by a later incarnation of the same one, and by that one
// once its word has passed seq.
type Beat struct {
	To            ranks.Rank
	ToIncarnation uint64
	Seq           uint64
}

// AppendHeartbeat appends a heartbeat payload.
func AppendHeartbeat(dst []byte, b Beat) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, b.To)
	dst = binary.LittleEndian.AppendUint64(dst, b.ToIncarnation)
	return binary.LittleEndian.AppendUint64(dst, b.Seq)
}

// DecodeHeartbeat decodes a heartbeat payload.
func DecodeHeartbeat(p []byte) (Beat, error) {
	if len(p) != HeartbeatPayloadSize {
		return Beat{}, errf(ReasonBadPayload, "heartbeat", "%d bytes, want %d", len(p), HeartbeatPayloadSize)
	}
	return Beat{To: binary.LittleEndian.Uint32(p), ToIncarnation: binary.LittleEndian.Uint64(p[4:]),
		Seq: binary.LittleEndian.Uint64(p[12:])}, nil
}

// AppendHello appends a Hello payload naming the rank the sender meant
// to reach.
func AppendHello(dst []byte, to ranks.Rank) []byte {
	return binary.LittleEndian.AppendUint32(dst, to)
}

// DecodeHello decodes a Hello payload.
func DecodeHello(p []byte) (ranks.Rank, error) {
	if len(p) != 4 {
		return 0, errf(ReasonBadPayload, "hello.to", "%d bytes, want 4", len(p))
	}
	return binary.LittleEndian.Uint32(p), nil
}
