package wire

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
)

func randRank(rng *rand.Rand, n int) ranks.Rank {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return ranks.Rank(n - 1)
	}
	return ranks.Rank(rng.IntN(n))
}

func randBcast(rng *rand.Rand, n int) *Bcast {
	m := &Bcast{}
	m.ID = bcast.ID{Source: randRank(rng, n), Seq: rng.Uint64() >> rng.IntN(64)}
	m.Kind = []bcast.Kind{bcast.Failed, bcast.Left, bcast.Note}[rng.IntN(3)]
	if m.Kind == bcast.Note && rng.IntN(4) > 0 {
		m.Payload = make([]byte, 1+rng.IntN(300))
		for i := range m.Payload {
			m.Payload[i] = byte(rng.Uint32())
		}
	}
	m.Detector = randRank(rng, n)
	m.DetectedAt = int64(rng.Uint64())
	for range rng.IntN(4) {
		m.Dead = append(m.Dead, randRank(rng, n))
	}
	for range rng.IntN(40) {
		m.D.Add(randRank(rng, n))
	}
	if rng.IntN(3) == 0 { // a corrected gossip's copy
		m.Hop.Phase = bcast.Phase(1 + rng.IntN(int(bcast.PhaseSOS)))
		m.Hop.Step = rng.Uint32() >> rng.IntN(32)
		if m.Hop.Phase == bcast.PhaseFwd || m.Hop.Phase == bcast.PhaseBwd {
			for range rng.IntN(bcast.MaxF + 2) {
				m.Hop.Known = append(m.Hop.Known, randRank(rng, n))
			}
		}
	}
	return m
}

func randMessage(rng *rand.Rand, n int) Message {
	switch rng.IntN(4) {
	case 0:
		return &NewObserver{Observer: randRank(rng, n)}
	case 2:
		return &Evicted{Rank: randRank(rng, n), Live: uint32(1 + rng.IntN(n))}
	case 1:
		return &Leave{Rank: randRank(rng, n), Emitter: randRank(rng, n)}
	}
	return randBcast(rng, n)
}

func TestMessageRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		n := 1 + rng.IntN(300000)
		if i%10 == 0 {
			n = math.MaxUint32 // ranks up to 2^32-2
		}
		m := randMessage(rng, n)
		b := AppendMessage(nil, m)
		if t0, err := PeekType(b); err != nil || t0 != m.Type() {
			t.Fatalf("PeekType: %v %v", t0, err)
		}
		got, err := DecodeMessage(b, n)
		if err != nil {
			t.Fatalf("decode %+v: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
		// Canonical: re-encoding gives the same bytes.
		if b2 := AppendMessage(nil, got); !bytes.Equal(b, b2) {
			t.Fatalf("re-encoding differs")
		}
		// Every strict prefix is rejected.
		for k := 0; k < len(b); k++ {
			if _, err := DecodeMessage(b[:k], n); err == nil {
				t.Fatalf("prefix %d of %d accepted for %+v", k, len(b), m)
			}
		}
	}
}

func TestBcastMaxRanks(t *testing.T) {
	m := &Bcast{}
	m.ID = bcast.ID{Source: math.MaxUint32, Seq: math.MaxUint64}
	m.Kind = bcast.Left
	m.Detector = math.MaxUint32
	m.DetectedAt = math.MinInt64
	m.Dead = []ranks.Rank{math.MaxUint32, 0}
	m.D = ranks.Of(0, 1, math.MaxUint32)
	got, err := DecodeMessage(AppendMessage(nil, m), 0)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestDecodeMessageErrors(t *testing.T) {
	valid := &Bcast{}
	valid.ID = bcast.ID{Source: 1, Seq: 2}
	valid.Kind = bcast.Failed
	valid.Detector = 3
	valid.Dead = []ranks.Rank{4}
	valid.D = ranks.Of(4, 6)
	vb := AppendMessage(nil, valid)
	// Offsets in vb: type, source, seq, kind(3), detector, at(5..12),
	// dead count(13), dead(14), d count(15), d0(16), delta(17), hop
	// phase(18).
	if len(vb) != 19 {
		t.Fatalf("layout changed: %d bytes", len(vb))
	}
	mod := func(i int, v byte) []byte { b := bytes.Clone(vb); b[i] = v; return b }
	cases := []struct {
		name  string
		b     []byte
		n     int
		field string
	}{
		{"empty", nil, 0, "message.type"},
		{"unknown type", []byte{9}, 0, "message.type"},
		{"zero type", []byte{0}, 0, "message.type"},
		{"observer missing", []byte{1}, 0, "newobserver.observer"},
		{"observer too big", []byte{1, 10}, 10, "newobserver.observer"},
		{"leave emitter missing", []byte{2, 1}, 0, "leave.emitter"},
		{"leave trailing", []byte{2, 1, 2, 0}, 0, "message"},
		{"non-minimal uvarint", []byte{1, 0x80, 0x00}, 0, "newobserver.observer"},
		{"uvarint overflow", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 0, "newobserver.observer"},
		{"rank above 32 bits", []byte{1, 0x80, 0x80, 0x80, 0x80, 0x10}, 0, "newobserver.observer"},
		{"unknown kind", mod(3, 7), 0, "bcast.kind"},
		{"source >= n", vb, 1, "bcast.source"},
		{"detector >= n", vb, 3, "bcast.detector"},
		{"dead >= n", vb, 4, "bcast.dead"},
		{"d >= n", vb, 6, "bcast.d"},
		{"dead count too big", mod(13, 100), 0, "bcast.dead"},
		{"d count too big", mod(15, 3), 0, "bcast.d"},
		{"d unsorted (zero delta)", mod(17, 0), 0, "bcast.d"},
		{"truncated detected_at", vb[:9], 0, "bcast.detected_at"},
		{"trailing", append(bytes.Clone(vb), 0), 0, "message"},
		{"hop phase missing", vb[:len(vb)-1], 0, "bcast.hop.phase"},
		{"hop phase unknown", append(bytes.Clone(vb[:len(vb)-1]), 9, 0, 0), 0, "bcast.hop.phase"},
		{"hop truncated step", append(bytes.Clone(vb[:len(vb)-1]), byte(bcast.PhaseFwd)), 0, "bcast.hop.step"},
		{"hop too many known", append(bytes.Clone(vb[:len(vb)-1]), byte(bcast.PhaseFwd), 1, 5, 1, 2, 3, 4, 5), 0, "bcast.hop.known"},
		{"hop known rank out of range", append(bytes.Clone(vb[:len(vb)-1]), byte(bcast.PhaseFwd), 1, 1, 9), 8, "bcast.hop.known"},
		{"note without payload length", mod(3, byte(bcast.Note))[:18], 0, "bcast.payload"},
		{"note payload count too big", append(mod(3, byte(bcast.Note))[:18], 5, 1), 0, "bcast.payload"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeMessage(c.b, c.n)
			if err == nil {
				t.Fatal("accepted")
			}
			e, ok := err.(*Error)
			if !ok || e.Field != c.field || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("error %v, want field %q", err, c.field)
			}
		})
	}
	if _, err := DecodeMessage(vb, 7+1); err != nil {
		t.Fatalf("valid message rejected: %v", err)
	}
}

// The decoder allocates in proportion to its input, whatever the counts say.
func TestDecodeMessageAllocBound(t *testing.T) {
	b := []byte{3, 1, 2, 1, 3, 0, 0, 0, 0, 0, 0, 0, 0}
	b = append(b, 0xff, 0xff, 0xff, 0xff, 0x0f) // dead count 2^32-1
	if _, err := DecodeMessage(b, 0); err == nil {
		t.Fatal("accepted")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		_, _ = DecodeMessage(b, 0)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 100; per > 1024 {
		t.Fatalf("%d bytes allocated per decode of a lying count", per)
	}
}

func benchBcast() *Bcast {
	m := &Bcast{}
	m.ID = bcast.ID{Source: 12345, Seq: 77}
	m.Kind = bcast.Failed
	m.Detector = 12346
	m.DetectedAt = 1_700_000_000_000_000_000
	m.Dead = []ranks.Rank{12344}
	for r := ranks.Rank(1000); r < 256000; r += 2000 {
		m.D.Add(r)
	}
	return m
}

func BenchmarkEncodeBcast(b *testing.B) {
	m := benchBcast()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for range b.N {
		buf = AppendMessage(buf[:0], m)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeBcast(b *testing.B) {
	enc := AppendMessage(nil, benchBcast())
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for range b.N {
		if _, err := DecodeMessage(enc, 256000); err != nil {
			b.Fatal(err)
		}
	}
}
