package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func testParams(rank uint32) Params {
	return Params{JobID: 42, Key: testKey, Rank: rank, Incarnation: 7, N: 8}
}

// macParams is testParams with tag function mac.
func macParams(rank uint32, mac MAC) Params {
	p := testParams(rank)
	p.MAC = mac
	return p
}

// eachMAC runs f as a subtest for each tag function.
func eachMAC(t *testing.T, f func(t *testing.T, mac MAC)) {
	for _, m := range []struct {
		name string
		mac  MAC
	}{{"hmac-sha256", MACHMACSHA256}, {"siphash", MACSipHash}} {
		t.Run(m.name, func(t *testing.T) { f(t, m.mac) })
	}
}

func mustAppend(t testing.TB, c *Codec, typ Type, payload []byte) []byte {
	t.Helper()
	b, err := c.Append(nil, typ, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFrameRoundTrip(t *testing.T) { eachMAC(t, testFrameRoundTrip) }

func testFrameRoundTrip(t *testing.T, mac MAC) {
	enc, dec := NewCodec(macParams(3, mac)), NewCodec(macParams(5, mac))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		typ := Type(1 + i%4)
		p := make([]byte, rng.IntN(300))
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		b := mustAppend(t, enc, typ, p)
		if len(b) != HeaderSize+len(p)+TagSize {
			t.Fatalf("frame length %d", len(b))
		}
		f, n, err := dec.Decode(b)
		if err != nil || n != len(b) {
			t.Fatalf("decode: %v, n=%d", err, n)
		}
		if f.Type != typ || f.JobID != 42 || f.Sender != 3 || f.Incarnation != 7 || !bytes.Equal(f.Payload, p) {
			t.Fatalf("got %+v", f)
		}
		g, err := dec.ReadFrame(bytes.NewReader(b))
		if err != nil || !bytes.Equal(g.Payload, p) || g.Type != typ {
			t.Fatalf("ReadFrame: %+v %v", g, err)
		}
	}
}

func TestReadFrameStream(t *testing.T) {
	enc, dec := NewCodec(testParams(1)), NewCodec(testParams(2))
	var stream []byte
	for i := range 50 {
		b := mustAppend(t, enc, Msg, bytes.Repeat([]byte{byte(i)}, i*100))
		stream = append(stream, b...)
	}
	r := bufio.NewReader(bytes.NewReader(stream))
	for i := range 50 {
		f, err := dec.ReadFrame(r)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if len(f.Payload) != i*100 || (i > 0 && f.Payload[0] != byte(i)) {
			t.Fatalf("frame %d: payload %d bytes", i, len(f.Payload))
		}
	}
	if _, err := dec.ReadFrame(r); err != io.EOF {
		t.Fatalf("after last frame: %v, want io.EOF", err)
	}
}

func TestFrameRejections(t *testing.T) {
	good := NewCodec(testParams(3))
	valid := mustAppend(t, good, Msg, []byte("hello"))
	wrongKey := NewCodec(Params{JobID: 42, Key: []byte("another key, 16+ bytes"), Rank: 3, Incarnation: 7})
	foreign := NewCodec(Params{JobID: 43, Key: testKey, Rank: 3, Incarnation: 7})
	unknown := NewCodec(Params{JobID: 42, Key: testKey, Rank: 8, Incarnation: 7})
	mod := func(f func(b []byte)) []byte {
		b := bytes.Clone(valid)
		f(b)
		return b
	}
	cases := []struct {
		name, reason string
		b            []byte
	}{
		{"bad magic", ReasonBadMagic, mod(func(b []byte) { b[0] = 'X' })},
		{"bad version", ReasonBadVersion, mod(func(b []byte) { b[2] = 1 })}, // the format before connection-bound tags
		{"bad type", ReasonBadType, mod(func(b []byte) { b[3] = 9 })},
		{"zero type", ReasonBadType, mod(func(b []byte) { b[3] = 0 })},
		{"foreign job", ReasonForeignJob, mustAppend(t, foreign, Msg, []byte("hello"))},
		{"wrong key", ReasonBadTag, mustAppend(t, wrongKey, Msg, []byte("hello"))},
		{"flipped payload", ReasonBadTag, mod(func(b []byte) { b[HeaderSize] ^= 1 })},
		{"flipped tag", ReasonBadTag, mod(func(b []byte) { b[len(b)-1] ^= 1 })},
		{"flipped incarnation", ReasonBadTag, mod(func(b []byte) { b[16] ^= 1 })},
		{"unknown rank", ReasonUnknownRank, mustAppend(t, unknown, Msg, []byte("hello"))},
		{"too large", ReasonTooLarge, mod(func(b []byte) { binary.LittleEndian.PutUint32(b[24:], DefaultMaxPayload+1) })},
		{"huge", ReasonTooLarge, mod(func(b []byte) { binary.LittleEndian.PutUint32(b[24:], 0xffffffff) })},
		{"short header", ReasonTruncated, valid[:HeaderSize-1]},
		{"short tag", ReasonTruncated, valid[:len(valid)-1]},
		{"empty", ReasonTruncated, nil},
	}
	dec := NewCodec(testParams(0))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := dec.Decode(c.b)
			if got := ReasonOf(err); got != c.reason {
				t.Fatalf("Decode: reason %q (%v), want %q", got, err, c.reason)
			}
			_, err = dec.ReadFrame(bytes.NewReader(c.b))
			want := c.reason
			if len(c.b) == 0 {
				if err != io.EOF {
					t.Fatalf("ReadFrame(empty) = %v, want io.EOF", err)
				}
				return
			}
			if got := ReasonOf(err); got != want {
				t.Fatalf("ReadFrame: reason %q (%v), want %q", got, err, want)
			}
			// The codec still works after a rejection.
			if _, _, err := dec.Decode(valid); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A lying length must not make ReadFrame allocate the declared size.
func TestReadFrameLyingLength(t *testing.T) {
	c := NewCodec(testParams(0))
	b := mustAppend(t, c, Msg, nil)
	binary.LittleEndian.PutUint32(b[24:], DefaultMaxPayload)
	if _, err := c.ReadFrame(bytes.NewReader(b[:HeaderSize+10])); ReasonOf(err) != ReasonTruncated {
		t.Fatal(err)
	}
	if cap(c.buf) > 64<<10 {
		t.Fatalf("buffer grew to %d bytes for 10 received", cap(c.buf))
	}
}

func TestAppendErrors(t *testing.T) {
	c := NewCodec(Params{JobID: 1, Key: testKey, MaxPayload: 10})
	if _, err := c.Append(nil, Msg, make([]byte, 11)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	if _, err := c.Append(nil, Type(0), nil); ReasonOf(err) != ReasonBadType {
		t.Fatalf("bad type: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("short key accepted")
		}
	}()
	NewCodec(Params{Key: []byte("short")})
}

func TestHeartbeatFrame(t *testing.T) { eachMAC(t, testHeartbeatFrame) }

func testHeartbeatFrame(t *testing.T, mac MAC) {
	enc, dec := NewCodec(macParams(4, mac)), NewCodec(macParams(1, mac))
	hb := enc.NewHeartbeatFrame()
	hb.Bind(1, 0xfeed)
	for _, seq := range []uint64{1, 2, 1 << 40, ^uint64(0)} {
		b := hb.Encode(seq)
		if len(b) != HeartbeatFrameSize {
			t.Fatalf("len %d", len(b))
		}
		f, _, err := dec.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeHeartbeat(f.Payload)
		want := Beat{To: 1, ToIncarnation: 0xfeed, Seq: seq}
		if f.Type != Heartbeat || f.Sender != 4 || err != nil || got != want {
			t.Fatalf("got %+v beat %+v err %v", f, got, err)
		}
		if binary.LittleEndian.Uint64(b[HeartbeatSeqAt:]) != seq {
			t.Fatal("sequence number not at HeartbeatSeqAt")
		}
		if want := mustAppend(t, enc, Heartbeat, AppendHeartbeat(nil, want)); !bytes.Equal(b, want) {
			t.Fatal("heartbeat frame differs from Append's")
		}
	}
}

func TestFastPathsDoNotAllocate(t *testing.T) { eachMAC(t, testFastPathsDoNotAllocate) }

func testFastPathsDoNotAllocate(t *testing.T, mac MAC) {
	enc, dec := NewCodec(macParams(4, mac)), NewCodec(macParams(1, mac))
	hb := enc.NewHeartbeatFrame()
	seq := uint64(0)
	if n := testing.AllocsPerRun(1000, func() { seq++; hb.Encode(seq) }); n != 0 {
		t.Fatalf("HeartbeatFrame.Encode: %v allocs", n)
	}
	b := hb.Encode(9)
	if n := testing.AllocsPerRun(1000, func() {
		if _, _, err := dec.Decode(b); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Decode: %v allocs", n)
	}
	r := bytes.NewReader(b)
	if _, err := dec.ReadFrame(r); err != nil { // warm the buffer
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		r.Reset(b)
		if _, err := dec.ReadFrame(r); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("ReadFrame: %v allocs", n)
	}
}

// A frame tagged with one function is refused by a codec using the other
// (by its version byte, before any tag is computed), and a SipHash frame
// with a tag of the wrong key, or changed in flight, fails its check.
func TestMACsDoNotMix(t *testing.T) {
	hm, sh := NewCodec(macParams(3, MACHMACSHA256)), NewCodec(macParams(3, MACSipHash))
	payload := AppendMessage(nil, &NewObserver{Observer: 2})
	fh, fs := mustAppend(t, hm, Msg, payload), mustAppend(t, sh, Msg, payload)
	if fh[2] != Version || fs[2] != VersionSipHash {
		t.Fatalf("version bytes %#x %#x, want %#x %#x", fh[2], fs[2], Version, VersionSipHash)
	}
	dh, ds := NewCodec(macParams(0, MACHMACSHA256)), NewCodec(macParams(0, MACSipHash))
	if _, _, err := dh.Decode(fs); ReasonOf(err) != ReasonBadVersion {
		t.Errorf("HMAC codec on a SipHash frame: %v, want %s", err, ReasonBadVersion)
	}
	if _, _, err := ds.Decode(fh); ReasonOf(err) != ReasonBadVersion {
		t.Errorf("SipHash codec on an HMAC frame: %v, want %s", err, ReasonBadVersion)
	}
	// An HMAC frame relabelled as SipHash: its tag is not SipHash's.
	relabelled := bytes.Clone(fh)
	relabelled[2] = VersionSipHash
	if _, _, err := ds.Decode(relabelled); ReasonOf(err) != ReasonBadTag {
		t.Errorf("relabelled frame: %v, want %s", err, ReasonBadTag)
	}
	other := macParams(3, MACSipHash)
	other.Key = []byte("another key of the right length!")
	if _, _, err := ds.Decode(mustAppend(t, NewCodec(other), Msg, payload)); ReasonOf(err) != ReasonBadTag {
		t.Errorf("SipHash frame under another key: %v, want %s", err, ReasonBadTag)
	}
	for i := range fs {
		if i == 2 {
			continue // the version byte: bad_version, above
		}
		b := bytes.Clone(fs)
		b[i] ^= 0x10
		if _, _, err := ds.Decode(b); err == nil {
			t.Fatalf("SipHash frame with byte %d changed accepted", i)
		}
	}
}

func TestSession(t *testing.T) {
	inc := NewIncarnations(8)
	s := &Session{Self: 2, Incarnations: inc}
	frame := func(typ Type, from uint32, incarnation uint64, payload []byte) *Frame {
		return &Frame{Type: typ, JobID: 42, Sender: from, Incarnation: incarnation, Payload: payload}
	}
	hello := func(from uint32, incarnation uint64, to uint32) *Frame {
		return frame(Hello, from, incarnation, AppendHello(nil, to))
	}
	expect := func(f *Frame, reason string) {
		t.Helper()
		_, err := s.Accept(f)
		if got := ReasonOf(err); got != reason {
			t.Fatalf("Accept(%+v): %q (%v), want %q", f, got, err, reason)
		}
	}
	expect(frame(Msg, 1, 10, nil), ReasonNoHello)
	expect(frame(Heartbeat, 1, 10, AppendHeartbeat(nil, Beat{Seq: 1})), ReasonNoHello)
	expect(hello(1, 10, 3), ReasonMisdirected)
	expect(frame(Hello, 1, 10, []byte{1}), ReasonBadPayload)
	if r, err := s.Accept(hello(1, 10, 2)); err != nil || r {
		t.Fatalf("first hello: restarted=%v err=%v", r, err)
	}
	if r, _, ok := s.Peer(); !ok || r != 1 {
		t.Fatal("Peer after hello")
	}
	expect(frame(Msg, 1, 10, []byte("x")), "")
	expect(frame(Heartbeat, 1, 10, AppendHeartbeat(nil, Beat{Seq: 5})), "")
	expect(frame(Heartbeat, 1, 10, []byte{1, 2}), ReasonBadPayload)
	expect(hello(1, 10, 2), "")          // repeated hello, same peer
	expect(hello(3, 10, 2), ReasonStale) // another rank on this connection
	expect(frame(Msg, 3, 10, nil), ReasonStale)
	expect(frame(Msg, 1, 11, nil), ReasonStale) // another incarnation

	// Rank 1 restarts: a new connection says hello with a newer incarnation.
	s2 := &Session{Self: 2, Incarnations: inc}
	if r, err := s2.Accept(hello(1, 20, 2)); err != nil || !r {
		t.Fatalf("restart hello: restarted=%v err=%v", r, err)
	}
	// The old connection's frames are now stale.
	expect(frame(Msg, 1, 10, nil), ReasonStale)
	// A hello from an older incarnation is stale on any connection.
	s3 := &Session{Self: 2, Incarnations: inc}
	if _, err := s3.Accept(hello(1, 15, 2)); ReasonOf(err) != ReasonStale {
		t.Fatalf("old incarnation hello: %v", err)
	}
	if _, err := inc.Observe(8, 1); ReasonOf(err) != ReasonUnknownRank {
		t.Fatalf("Observe out of range: %v", err)
	}
}

func TestNewIncarnationOrdered(t *testing.T) {
	a := NewIncarnation()
	b := NewIncarnation()
	if a == 0 || b == a {
		t.Fatalf("incarnations %#x %#x", a, b)
	}
	if b>>20 < a>>20 {
		t.Fatalf("time part went backwards: %#x then %#x", a, b)
	}
}

func BenchmarkHeartbeatEncode(b *testing.B) {
	hb := NewCodec(testParams(1)).NewHeartbeatFrame()
	b.ReportAllocs()
	for i := range b.N {
		hb.Encode(uint64(i))
	}
}

func BenchmarkDecodeHeartbeatFrame(b *testing.B) {
	buf := NewCodec(testParams(1)).NewHeartbeatFrame().Encode(99)
	dec := NewCodec(testParams(2))
	b.ReportAllocs()
	for range b.N {
		if _, _, err := dec.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBoundFrames: frames of a codec bound to a connection's challenge are
// accepted in order by a receiver bound to the same challenge, through
// Decode and ReadFrame; replayed on another connection (another
// challenge), repeated, dropped or reordered on this one, or read by an
// unbound codec, they fail with ReasonBadTag.
func TestBoundFrames(t *testing.T) {
	ch := NewChallenge()
	enc := NewCodec(testParams(3))
	enc.Bind(ch)
	var frames [][]byte
	for i := range 5 {
		frames = append(frames, mustAppend(t, enc, Msg, []byte{byte(i)}))
	}
	recv := func(c Challenge) *Codec {
		d := NewCodec(testParams(5))
		d.Bind(c)
		return d
	}
	d := recv(ch)
	for i, b := range frames {
		f, _, err := d.Decode(b)
		if err != nil || f.Payload[0] != byte(i) {
			t.Fatalf("frame %d: %v", i, err)
		}
	}
	r := recv(ch)
	stream := bufio.NewReader(bytes.NewReader(bytes.Join(frames, nil)))
	for i := range frames {
		if f, err := r.ReadFrame(stream); err != nil || f.Payload[0] != byte(i) {
			t.Fatalf("ReadFrame %d: %v", i, err)
		}
	}
	bad := map[string]func() error{
		"replayed on another connection": func() error { _, _, err := recv(NewChallenge()).Decode(frames[0]); return err },
		"repeated": func() error {
			d := recv(ch)
			_, _, _ = d.Decode(frames[0])
			_, _, err := d.Decode(frames[0])
			return err
		},
		"dropped one": func() error {
			d := recv(ch)
			_, _, _ = d.Decode(frames[0])
			_, _, err := d.Decode(frames[2])
			return err
		},
		"read by an unbound codec": func() error { _, _, err := NewCodec(testParams(5)).Decode(frames[0]); return err },
	}
	for name, fn := range bad {
		if err := fn(); ReasonOf(err) != ReasonBadTag {
			t.Errorf("%s: %v, want %s", name, err, ReasonBadTag)
		}
	}
	// Bind restarts the index: a new connection of the same codec.
	ch2 := NewChallenge()
	enc.Bind(ch2)
	if _, _, err := recv(ch2).Decode(mustAppend(t, enc, Hello, AppendHello(nil, 5))); err != nil {
		t.Fatalf("after a new Bind: %v", err)
	}
}
