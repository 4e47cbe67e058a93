package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/ranks"
)

func randEraSet(rng *rand.Rand, max int) ranks.Set {
	var s ranks.Set
	for range rng.IntN(max + 1) {
		switch rng.IntN(3) {
		case 0:
			s.Add(ranks.Rank(rng.Uint32()))
		default:
			s.Add(ranks.Rank(rng.IntN(300)))
		}
	}
	return s
}

// randEraMsg returns a random valid message; for a given rng state it
// returns the messages that era's tests drew before the encoding moved here
// (the fuzz seeds are unchanged).
func randEraMsg(rng *rand.Rand) era.Msg {
	m := era.Msg{Kind: era.Kind(1 + rng.IntN(3)), ID: era.ID{Epoch: rng.Uint32(), Seq: rng.Uint64() >> rng.IntN(64)}}
	m.Dead = randEraSet(rng, 20)
	if m.Kind == era.ResultRequest {
		return m
	}
	if k := rng.IntN(40); k > 0 {
		m.Value = make([]byte, k)
		for i := range m.Value {
			m.Value[i] = byte(rng.Uint32())
		}
	}
	if rng.IntN(2) == 0 {
		m.Acked = m.Dead.Clone()
	} else {
		m.Acked = ranks.Set{}
		for _, r := range m.Dead.Members() {
			if rng.IntN(2) == 0 {
				m.Acked.Add(r)
			}
		}
	}
	m.Collect = rng.Uint64() >> rng.IntN(64)
	return m
}

func eraMsgEqual(a, b *era.Msg) bool {
	return a.Kind == b.Kind && a.ID == b.ID && bytes.Equal(a.Value, b.Value) &&
		a.Dead.Equal(b.Dead) && a.Acked.Equal(b.Acked) && a.Collect == b.Collect
}

func mustEraMsg(tb testing.TB, m *era.Msg) []byte {
	tb.Helper()
	b, err := AppendEraMsg(nil, m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestEraMsgRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		m := randEraMsg(rng)
		b := mustEraMsg(t, &m)
		got, err := DecodeEraMsg(b)
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if !eraMsgEqual(&m, &got) {
			t.Fatalf("round trip: %+v became %+v", m, got)
		}
		// The decoded message does not alias the input.
		for i := range b {
			b[i] ^= 0xff
		}
		if !eraMsgEqual(&m, &got) {
			t.Fatal("decoded message aliases its input")
		}
	}
}

func TestEraMsgEncodingIsCompact(t *testing.T) {
	m := era.Msg{Kind: era.Up, ID: era.ID{Epoch: 1, Seq: 2}, Value: []byte{1, 2, 3, 4}, Collect: 2}
	b := mustEraMsg(t, &m)
	if len(b) != eraMsgHeaderSize+1+1+4+1+1 {
		t.Fatalf("failure-free UP is %d bytes: % x", len(b), b)
	}
	if b[0] != 0x11 {
		t.Fatalf("type byte %#x, want version 1 kind 1", b[0])
	}
}

// TestEraMsgEncoding pins the encoding byte for byte: nodes of different
// builds of this version must interoperate.
func TestEraMsgEncoding(t *testing.T) {
	for _, tc := range []struct {
		m    era.Msg
		want string
	}{
		{era.Msg{Kind: era.Up, ID: era.ID{Epoch: 1, Seq: 2}, Value: []byte{1, 2, 3, 4}, Collect: 2},
			"11" + "01000000" + "0200000000000000" + "02" + "0401020304" + "00" + "00"},
		{era.Msg{Kind: era.Down, ID: era.ID{Epoch: 7, Seq: 300}, Value: []byte{9}, Dead: ranks.Of(3, 70000), Acked: ranks.Of(3), Collect: 300},
			"12" + "07000000" + "2c01000000000000" + "ac02" + "0109" + "02" + "03" + "eca204" + "01" + "01" + "03"},
		{era.Msg{Kind: era.ResultRequest, ID: era.ID{Epoch: 1, Seq: 9}, Dead: ranks.Of(0, 1)},
			"13" + "01000000" + "0900000000000000" + "02" + "00" + "00"},
	} {
		if got := hexString(mustEraMsg(t, &tc.m)); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.m.Kind, got, tc.want)
		}
	}
}

func TestEraMsgDecodeErrors(t *testing.T) {
	up := era.Msg{Kind: era.Up, ID: era.ID{Epoch: 1, Seq: 9}, Value: []byte{7}, Dead: ranks.Of(3, 70000), Acked: ranks.Of(3)}
	good := mustEraMsg(t, &up)
	rr := era.Msg{Kind: era.ResultRequest, ID: era.ID{Epoch: 1, Seq: 9}, Dead: ranks.Of(1)}
	goodRR := mustEraMsg(t, &rr)
	patch := func(b []byte, i int, v byte) []byte { b = bytes.Clone(b); b[i] = v; return b }
	const h = eraMsgHeaderSize
	cases := []struct {
		name   string
		in     []byte
		field  string
		reason string
	}{
		{"empty", nil, "msg.type", ReasonTruncated},
		{"version", patch(good, 0, 0x21), "msg.type", ReasonBadPayload},
		{"kind", patch(good, 0, 0x14), "msg.type", ReasonBadPayload},
		{"epoch", good[:3], "msg.id.epoch", ReasonTruncated},
		{"seq", good[:9], "msg.id.seq", ReasonTruncated},
		{"collect", good[:h], "msg.collect", ReasonTruncated},
		{"value length", append(bytes.Clone(good[:h+1]), 0x7f), "msg.value", ReasonBadPayload},
		{"dead count", good[:h+3], "msg.dead.count", ReasonTruncated},
		{"dead rank", good[:h+6], "msg.dead[1]", ReasonTruncated},
		{"acked mode", good[:len(good)-3], "msg.acked.mode", ReasonTruncated},
		{"acked mode value", patch(good, len(good)-3, 9), "msg.acked.mode", ReasonBadPayload},
		{"trailing", append(bytes.Clone(good), 0), "msg", ReasonBadPayload},
		{"rr trailing", append(bytes.Clone(goodRR), 1), "msg", ReasonBadPayload},
		{"rank overflow", append(bytes.Clone(goodRR[:h]), 2, 0xff, 0xff, 0xff, 0xff, 0x0f, 0), "msg.dead[1]", ReasonBadPayload},
		{"count too large", append(bytes.Clone(goodRR[:h]), 0xff, 0x01), "msg.dead.count", ReasonBadPayload},
		{"uvarint overflow", append(bytes.Clone(good[:h]), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "msg.collect", ReasonBadPayload},
	}
	for _, tc := range cases {
		_, err := DecodeEraMsg(tc.in)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: error %v, want an *Error", tc.name, err)
			continue
		}
		if e.Field != tc.field || e.Reason() != tc.reason || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: field %q reason %s (%v), want %q %s", tc.name, e.Field, e.Reason(), err, tc.field, tc.reason)
		}
	}
	if m, err := DecodeEraMsg(good); err != nil || !eraMsgEqual(&m, &up) {
		t.Fatalf("good message: %v %+v", err, m)
	}
}

func TestEraMsgEncodeErrors(t *testing.T) {
	for _, m := range []era.Msg{
		{Kind: 0},
		{Kind: 4},
		{Kind: era.ResultRequest, Value: []byte{1}},
		{Kind: era.ResultRequest, Collect: 1},
		{Kind: era.ResultRequest, Acked: ranks.Of(1)},
	} {
		if b, err := AppendEraMsg([]byte{1}, &m); err == nil || len(b) != 1 {
			t.Errorf("%+v encoded: % x", m, b)
		} else if e, ok := err.(*Error); !ok || e.Field == "" {
			t.Errorf("%+v: error %v does not name a field", m, err)
		}
	}
}

func BenchmarkEraMsgEncodeDecode(b *testing.B) {
	m := era.Msg{Kind: era.Up, ID: era.ID{Epoch: 1, Seq: 1 << 40}, Value: []byte{1, 2, 3, 4}, Collect: 1 << 40}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendEraMsg(buf[:0], &m)
		if _, err := DecodeEraMsg(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecodeEraMsg (era's FuzzUnmarshalMsg before the encoding moved here,
// same seeds): DecodeEraMsg never panics, fails with an *Error naming the
// field, re-encodes what it accepts, and a core never panics on it.
func FuzzDecodeEraMsg(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 20 {
		m := randEraMsg(rng)
		b, _ := AppendEraMsg(nil, &m)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{0x13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeEraMsg(b)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Field == "" {
				t.Fatalf("error %v is not an *Error naming a field", err)
			}
			return
		}
		if m.Dead.Len() > len(b) || m.Acked.Len() > len(b) || len(m.Value) > len(b) {
			t.Fatalf("decoded more elements than input bytes")
		}
		again, err := AppendEraMsg(nil, &m)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", m, err)
		}
		if m2, err := DecodeEraMsg(again); err != nil || !eraMsgEqual(&m, &m2) {
			t.Fatalf("re-decoding: %v, %+v vs %+v", err, m, m2)
		}
		// A core never panics on a decoded message either.
		c := era.NewCore(0, 4, era.Binary(4), era.BitAND)
		c.Step(1, m)
		c.Step(3, m)
	})
}
