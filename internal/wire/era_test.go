package era

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

func randSet(rng *rand.Rand, max int) ranks.Set {
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

func randMsg(rng *rand.Rand) Msg {
	m := Msg{Kind: Kind(1 + rng.IntN(3)), ID: ID{Epoch: rng.Uint32(), Seq: rng.Uint64() >> rng.IntN(64)}}
	m.Dead = randSet(rng, 20)
	if m.Kind == ResultRequest {
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
		m.Acked = intersect(m.Dead.Clone(), &ranks.Set{})
		for _, r := range m.Dead.Members() {
			if rng.IntN(2) == 0 {
				m.Acked.Add(r)
			}
		}
	}
	m.Collect = rng.Uint64() >> rng.IntN(64)
	return m
}

func msgEqual(a, b *Msg) bool {
	return a.Kind == b.Kind && a.ID == b.ID && bytes.Equal(a.Value, b.Value) &&
		a.Dead.Equal(b.Dead) && a.Acked.Equal(b.Acked) && a.Collect == b.Collect
}

func TestMsgRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		m := randMsg(rng)
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Msg
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if !msgEqual(&m, &got) {
			t.Fatalf("round trip: %+v became %+v", m, got)
		}
		// The decoded message does not alias the input.
		for i := range b {
			b[i] ^= 0xff
		}
		if !msgEqual(&m, &got) {
			t.Fatal("decoded message aliases its input")
		}
	}
}

func TestMsgEncodingIsCompact(t *testing.T) {
	m := Msg{Kind: Up, ID: ID{Epoch: 1, Seq: 2}, Value: []byte{1, 2, 3, 4}, Collect: 2}
	b, _ := m.MarshalBinary()
	if len(b) != msgHeaderSize+1+1+4+1+1 {
		t.Fatalf("failure-free UP is %d bytes: % x", len(b), b)
	}
	if b[0] != 0x11 {
		t.Fatalf("type byte %#x, want version 1 kind 1", b[0])
	}
}

func TestMsgDecodeErrors(t *testing.T) {
	up := Msg{Kind: Up, ID: ID{Epoch: 1, Seq: 9}, Value: []byte{7}, Dead: ranks.Of(3, 70000), Acked: ranks.Of(3)}
	good, _ := up.MarshalBinary()
	rr := Msg{Kind: ResultRequest, ID: ID{Epoch: 1, Seq: 9}, Dead: ranks.Of(1)}
	goodRR, _ := rr.MarshalBinary()
	patch := func(b []byte, i int, v byte) []byte { b = bytes.Clone(b); b[i] = v; return b }
	cases := []struct {
		name  string
		in    []byte
		field string
	}{
		{"empty", nil, "msg.type"},
		{"version", patch(good, 0, 0x21), "msg.type"},
		{"kind", patch(good, 0, 0x14), "msg.type"},
		{"epoch", good[:3], "msg.id.epoch"},
		{"seq", good[:9], "msg.id.seq"},
		{"collect", good[:msgHeaderSize], "msg.collect"},
		{"value length", append(bytes.Clone(good[:msgHeaderSize+1]), 0x7f), "msg.value"},
		{"dead count", good[:msgHeaderSize+3], "msg.dead.count"},
		{"dead rank", good[:msgHeaderSize+6], "msg.dead[1]"},
		{"acked mode", good[:len(good)-3], "msg.acked.mode"},
		{"acked mode value", patch(good, len(good)-3, 9), "msg.acked.mode"},
		{"trailing", append(bytes.Clone(good), 0), "msg"},
		{"rr trailing", append(bytes.Clone(goodRR), 1), "msg"},
		{"rank overflow", append(bytes.Clone(goodRR[:msgHeaderSize]), 2, 0xff, 0xff, 0xff, 0xff, 0x0f, 0), "msg.dead[1]"},
		{"count too large", append(bytes.Clone(goodRR[:msgHeaderSize]), 0xff, 0x01), "msg.dead.count"},
		{"uvarint overflow", append(bytes.Clone(good[:msgHeaderSize]), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), "msg.collect"},
	}
	for _, tc := range cases {
		var m Msg
		err := m.UnmarshalBinary(tc.in)
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: error %v, want a *DecodeError", tc.name, err)
			continue
		}
		if de.Field != tc.field || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: field %q (%v), want %q", tc.name, de.Field, err, tc.field)
		}
	}
	var m Msg
	if err := m.UnmarshalBinary(good); err != nil || !msgEqual(&m, &up) {
		t.Fatalf("good message: %v %+v", err, m)
	}
}

func TestMsgEncodeErrors(t *testing.T) {
	for _, m := range []Msg{
		{Kind: 0},
		{Kind: 4},
		{Kind: ResultRequest, Value: []byte{1}},
		{Kind: ResultRequest, Collect: 1},
	} {
		if _, err := m.MarshalBinary(); err == nil {
			t.Errorf("%+v encoded", m)
		}
	}
}

func FuzzUnmarshalMsg(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 20 {
		m := randMsg(rng)
		b, _ := m.MarshalBinary()
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{0x13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Msg
		if err := m.UnmarshalBinary(b); err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || de.Field == "" {
				t.Fatalf("error %v is not a *DecodeError naming a field", err)
			}
			return
		}
		if m.Dead.Len() > len(b) || m.Acked.Len() > len(b) || len(m.Value) > len(b) {
			t.Fatalf("decoded more elements than input bytes")
		}
		again, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", m, err)
		}
		var m2 Msg
		if err := m2.UnmarshalBinary(again); err != nil || !msgEqual(&m, &m2) {
			t.Fatalf("re-decoding: %v, %+v vs %+v", err, m, m2)
		}
		// A core never panics on a decoded message either.
		c := NewCore(0, 4, Binary(4), BitAND)
		c.Step(1, m)
		c.Step(3, m)
	})
}
