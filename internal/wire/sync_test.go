package wire

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
)

// syncSamples returns valid Sync messages: a request, an answer, both, and
// the largest allowed.
func syncSamples() []*Sync {
	full := &Sync{}
	for i := range MaxSyncRanks {
		full.Ask = append(full.Ask, ranks.Rank(3*i))
		full.Records = append(full.Records, SyncRecord{Rank: ranks.Rank(2 * i), Kind: bcast.Failed, Detector: 1, DetectedAt: int64(i)})
	}
	return []*Sync{
		{Ask: []ranks.Rank{3}},
		{Ask: []ranks.Rank{0, 1, 2, 40}},
		{Records: []SyncRecord{{Rank: 3, Kind: bcast.Failed, Detector: 4, DetectedAt: 1_700_000_000_123_456_789}}},
		{Records: []SyncRecord{{Rank: 1, Kind: bcast.Left, Detector: 2, DetectedAt: -1}, {Rank: 9, Kind: bcast.Failed, Detector: 10}}},
		{Ask: []ranks.Rank{7}, Records: []SyncRecord{{Rank: 2, Kind: bcast.Left, Detector: 3}}},
		full,
	}
}

func randSync(rng *rand.Rand, n int) *Sync {
	m := &Sync{}
	var ask, rec ranks.Set
	for range rng.IntN(10) {
		ask.Add(randRank(rng, n))
	}
	for range rng.IntN(10) {
		rec.Add(randRank(rng, n))
	}
	if ask.Len()+rec.Len() == 0 {
		ask.Add(randRank(rng, n))
	}
	m.Ask = ask.Members()
	for _, r := range rec.Members() {
		kind := bcast.Failed
		if rng.IntN(2) == 0 {
			kind = bcast.Left
		}
		m.Records = append(m.Records, SyncRecord{Rank: r, Kind: kind, Detector: randRank(rng, n), DetectedAt: int64(rng.Uint64())})
	}
	return m
}

func TestSyncRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	msgs := syncSamples()
	for i := range 3000 {
		n := 1 + rng.IntN(300000)
		if i%10 == 0 {
			n = math.MaxUint32
		}
		msgs = append(msgs, randSync(rng, n))
	}
	for _, m := range msgs {
		b := AppendMessage(nil, m)
		if typ, err := PeekType(b); err != nil || typ != TypeSync {
			t.Fatalf("PeekType = %v, %v", typ, err)
		}
		got, err := DecodeMessage(b, 0)
		if err != nil {
			t.Fatalf("decode %+v: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
		if again := AppendMessage(nil, got); !bytes.Equal(again, b) {
			t.Fatal("re-encoding differs")
		}
		for k := 1; k < len(b); k++ {
			if _, err := DecodeMessage(b[:k], 0); err == nil {
				t.Fatalf("prefix of %d/%d bytes accepted", k, len(b))
			}
		}
	}
}

func TestSyncRejects(t *testing.T) {
	rec := func(r ranks.Rank) SyncRecord { return SyncRecord{Rank: r, Kind: bcast.Failed, Detector: 0} }
	tooMany := &Sync{}
	for i := range MaxSyncRanks + 1 {
		tooMany.Ask = append(tooMany.Ask, ranks.Rank(i))
	}
	for _, tc := range []struct {
		name   string
		b      []byte
		n      int
		field  string
		reason string
	}{
		{"empty", AppendMessage(nil, &Sync{}), 8, "sync", ReasonBadPayload},
		{"ask rank = N", AppendMessage(nil, &Sync{Ask: []ranks.Rank{2, 8}}), 8, "sync.ask", ReasonUnknownRank},
		{"record rank = N", AppendMessage(nil, &Sync{Records: []SyncRecord{rec(8)}}), 8, "sync.records.rank", ReasonUnknownRank},
		{"detector = N", AppendMessage(nil, &Sync{Records: []SyncRecord{{Rank: 1, Kind: bcast.Failed, Detector: 9}}}), 8, "sync.records.detector", ReasonUnknownRank},
		{"ask repeated", AppendMessage(nil, &Sync{Ask: []ranks.Rank{2, 2}}), 8, "sync.ask", ReasonBadPayload},
		{"ask decreasing", AppendMessage(nil, &Sync{Ask: []ranks.Rank{5, 2}}), 0, "sync.ask", ReasonBadPayload},
		{"records decreasing", AppendMessage(nil, &Sync{Records: []SyncRecord{rec(5), rec(2)}}), 8, "sync.records.rank", ReasonBadPayload},
		{"records repeated", AppendMessage(nil, &Sync{Records: []SyncRecord{rec(5), rec(5)}}), 8, "sync.records.rank", ReasonBadPayload},
		{"bad kind", AppendMessage(nil, &Sync{Records: []SyncRecord{{Rank: 1, Kind: 3}}}), 8, "sync.records.kind", ReasonBadType},
		{"too many", AppendMessage(nil, tooMany), 0, "sync.ask", ReasonBadPayload},
		{"count beyond input", []byte{byte(TypeSync), 5, 1}, 0, "sync.ask", ReasonBadPayload},
		{"trailing", append(AppendMessage(nil, &Sync{Ask: []ranks.Rank{1}}), 0), 8, "message", ReasonBadPayload},
		{"truncated", []byte{byte(TypeSync), 0, 1, 1, 1, 1, 0, 0}, 8, "sync.records.detected_at", ReasonTruncated},
	} {
		_, err := DecodeMessage(tc.b, tc.n)
		e, ok := err.(*Error)
		if !ok || e.Field != tc.field || e.Reason() != tc.reason {
			t.Errorf("%s: %v, want field %s, reason %s", tc.name, err, tc.field, tc.reason)
		}
	}
}

// FuzzDecodeSync fuzzes DecodeMessage from Sync seeds (FuzzDecodeMessage
// covers every type; this target starts next to the Sync encodings). It
// checks that an accepted message re-encodes identically, that its lists
// are strictly increasing, bounded and within the rank bound.
func FuzzDecodeSync(f *testing.F) {
	for _, m := range syncSamples() {
		b := AppendMessage(nil, m)
		f.Add(b, 0)
		f.Add(b, 41)
		f.Add(b[:len(b)/2], 0)
	}
	f.Add([]byte{byte(TypeSync), 0, 0}, 0)
	f.Add([]byte{byte(TypeSync), 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0}, 0)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		got, err := DecodeMessage(b, n)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			return
		}
		if again := AppendMessage(nil, got); !bytes.Equal(again, b) {
			t.Fatalf("accepted message does not re-encode identically:\n%x\n%x", b, again)
		}
		s, ok := got.(*Sync)
		if !ok {
			return
		}
		if len(s.Ask) > MaxSyncRanks || len(s.Records) > MaxSyncRanks || len(s.Ask)+len(s.Records) == 0 {
			t.Fatalf("accepted %d asks and %d records", len(s.Ask), len(s.Records))
		}
		var rs []ranks.Rank
		for i, r := range s.Ask {
			if i > 0 && r <= s.Ask[i-1] {
				t.Fatalf("ask not increasing: %v", s.Ask)
			}
			rs = append(rs, r)
		}
		for i, rec := range s.Records {
			if i > 0 && rec.Rank <= s.Records[i-1].Rank {
				t.Fatalf("records not increasing: %+v", s.Records)
			}
			if rec.Kind != bcast.Failed && rec.Kind != bcast.Left {
				t.Fatalf("kind %d accepted", rec.Kind)
			}
			rs = append(rs, rec.Rank, rec.Detector)
		}
		for _, r := range rs {
			if n > 0 && int64(r) >= int64(n) {
				t.Fatalf("rank %d accepted with bound %d", r, n)
			}
		}
	})
}
