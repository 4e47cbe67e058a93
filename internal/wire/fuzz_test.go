package wire

import (
	"bufio"
	"bytes"
	"io"
	"reflect"
	"testing"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
)

// fuzzFrames returns valid frames of every type from rank 3 to rank 0,
// with HMAC-SHA256 tags.
func fuzzFrames(tb testing.TB) [][]byte { return macFrames(tb, MACHMACSHA256) }

// macFrames returns valid frames of every type from rank 3 to rank 0
// tagged with mac.
func macFrames(tb testing.TB, mac MAC) [][]byte {
	c := NewCodec(macParams(3, mac))
	out := [][]byte{
		mustAppend(tb, c, Hello, AppendHello(nil, 0)),
		mustAppend(tb, c, Msg, AppendMessage(nil, &NewObserver{Observer: 2})),
		mustAppend(tb, c, Msg, AppendMessage(nil, benchBcast())),
		mustAppend(tb, c, Heartbeat, AppendHeartbeat(nil, Beat{To: 0, ToIncarnation: 7, Seq: 12})),
		mustAppend(tb, c, Bye, nil),
	}
	return out
}

// FuzzDecodeFrame decodes arbitrary bytes with a codec of each tag
// function: whatever one accepts must re-encode identically.
func FuzzDecodeFrame(f *testing.F) {
	for _, mac := range []MAC{MACHMACSHA256, MACSipHash} {
		for _, b := range macFrames(f, mac) {
			f.Add(b)
			f.Add(b[:len(b)/2])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mac := range []MAC{MACHMACSHA256, MACSipHash} {
			dec, enc := NewCodec(macParams(0, mac)), NewCodec(macParams(3, mac))
			fr, n, err := dec.Decode(b)
			if err != nil {
				if ReasonOf(err) == "" {
					t.Fatalf("untyped error %v", err)
				}
				continue
			}
			if n > len(b) || n != HeaderSize+len(fr.Payload)+TagSize {
				t.Fatalf("n=%d len=%d payload=%d", n, len(b), len(fr.Payload))
			}
			// Only rank 3, incarnation 7 frames can be authentic here.
			again, err := enc.Append(nil, fr.Type, fr.Payload)
			if err != nil || !bytes.Equal(again, b[:n]) {
				t.Fatalf("accepted frame (MAC %d) does not re-encode identically", mac)
			}
		}
	})
}

// FuzzReadFrames feeds a byte stream to ReadFrame and a Session, as a
// transport's connection reader does: payloads limited to 64 bytes
// (SetReadLimit) until a Hello is accepted.
func FuzzReadFrames(f *testing.F) {
	frames := fuzzFrames(f)
	f.Add(bytes.Join(frames, nil))
	f.Add(bytes.Join(frames[1:], nil))
	f.Add(append(bytes.Clone(frames[0]), frames[3][:30]...))
	f.Fuzz(func(t *testing.T, b []byte) {
		dec := NewCodec(testParams(0))
		s := &Session{Self: 0, Incarnations: NewIncarnations(8)}
		r := bufio.NewReader(bytes.NewReader(b))
		const limit = 64
		dec.SetReadLimit(limit)
		limited := true
		for {
			fr, err := dec.ReadFrame(r)
			if limited && (len(fr.Payload) > limit || cap(dec.buf) > limit+TagSize) {
				t.Fatalf("before the Hello: a payload of %d bytes, a buffer of %d", len(fr.Payload), cap(dec.buf))
			}
			if err == io.EOF {
				return
			}
			if err != nil {
				if ReasonOf(err) == "" {
					t.Fatalf("untyped error %v", err)
				}
				return
			}
			if _, err := s.Accept(&fr); err != nil {
				if ReasonOf(err) == "" {
					t.Fatalf("untyped error %v", err)
				}
				return
			}
			if fr.Type == Hello {
				dec.SetReadLimit(0)
				limited = false
			}
			if cap(dec.buf) > 2*len(b)+4096 {
				t.Fatalf("buffer %d for %d input bytes", cap(dec.buf), len(b))
			}
		}
	})
}

func FuzzDecodeMessage(f *testing.F) {
	m := benchBcast()
	small := &Bcast{Message: bcast.Message{ID: bcast.ID{Source: 1, Seq: 2}, Kind: bcast.Left,
		Dead: []ranks.Rank{5}, D: ranks.Of(5), Detector: 4}}
	note := &Bcast{Message: bcast.Message{ID: bcast.ID{Source: 2, Seq: 1}, Kind: bcast.Note,
		D: ranks.Of(5), Detector: 2, Payload: []byte("R\x01report")}}
	gossip := &Bcast{Message: bcast.Message{ID: bcast.ID{Source: 1, Seq: 2}, Kind: bcast.Failed,
		Dead: []ranks.Rank{5}, D: ranks.Of(5), Detector: 1, Hop: bcast.Hop{Phase: bcast.PhaseFwd, Step: 17, Known: []ranks.Rank{3, 9}}}}
	for _, msg := range []Message{&NewObserver{Observer: 7}, &Leave{Rank: 3, Emitter: 2}, &Evicted{Rank: 5, Live: 9}, m, small, note, gossip, &Probe{Round: 3}, &Alive{Round: 1 << 40}} {
		f.Add(AppendMessage(nil, msg), 0)
		f.Add(AppendMessage(nil, msg), 256000)
	}
	f.Add([]byte{3, 1, 2, 1, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, 0)
	for _, a := range agreeSamples() {
		f.Add(AppendMessage(nil, a), 0)
		f.Add(AppendMessage(nil, a), 64)
	}
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		got, err := DecodeMessage(b, n)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			return
		}
		again := AppendMessage(nil, got)
		if !bytes.Equal(again, b) {
			t.Fatalf("accepted message does not re-encode identically:\n%x\n%x", b, again)
		}
		back, err := DecodeMessage(again, n)
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzDecodeHello(f *testing.F) {
	f.Add(AppendHello(nil, 5))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		to, err := DecodeHello(b)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendHello(nil, to), b) {
			t.Fatal("re-encoding differs")
		}
	})
}

func FuzzDecodeHeartbeat(f *testing.F) {
	f.Add(AppendHeartbeat(nil, Beat{To: 3, ToIncarnation: 1 << 40, Seq: 5}))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		beat, err := DecodeHeartbeat(b)
		if err != nil {
			return
		}
		if !bytes.Equal(AppendHeartbeat(nil, beat), b) {
			t.Fatal("re-encoding differs")
		}
	})
}
