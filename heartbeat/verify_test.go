package heartbeat_test

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/internal/mono"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// fakeFrameLen is the length of fakeVerifier's heartbeats: "hb", sender
// (4 bytes), incarnation (8), sequence number (8, at fakeSeqAt), tag (8).
const fakeFrameLen, fakeSeqAt = 30, 14

// fakeVerifier is a transport's side of the verification, with a keyed
// hash standing for the HMAC: HeartbeatDatagram checks like a transport's
// drain and counts its rejects by reason.
type fakeVerifier struct {
	key   byte
	slots *transport.Slots

	mu       sync.Mutex
	latest   map[ranks.Rank]uint64 // the incarnations known (older ones are stale)
	rejected map[string]int
	accepted int
}

func newFakeVerifier(slots *transport.Slots) *fakeVerifier {
	return &fakeVerifier{key: 42, slots: slots, latest: map[ranks.Rank]uint64{}, rejected: map[string]int{}}
}

func (f *fakeVerifier) frame(key byte, from ranks.Rank, inc, seq uint64) []byte {
	b := make([]byte, fakeFrameLen)
	copy(b, "hb")
	binary.LittleEndian.PutUint32(b[2:], from)
	binary.LittleEndian.PutUint64(b[6:], inc)
	binary.LittleEndian.PutUint64(b[fakeSeqAt:], seq)
	h := fnv.New64a()
	h.Write([]byte{key})
	h.Write(b[:22])
	binary.LittleEndian.PutUint64(b[22:], h.Sum64())
	return b
}

func (f *fakeVerifier) HeartbeatExpected(from ranks.Rank, inc uint64) (func([]byte, uint64) int, int, *uint64) {
	return func(dst []byte, seq uint64) int { return copy(dst, f.frame(f.key, from, inc, seq)) }, fakeSeqAt, f.slots.Word(from)
}

func (f *fakeVerifier) HeartbeatDatagram(b []byte) (ranks.Rank, uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(b) != fakeFrameLen || string(b[:2]) != "hb" {
		f.rejected["length"]++
		return 0, 0, false
	}
	from, inc, seq := binary.LittleEndian.Uint32(b[2:]), binary.LittleEndian.Uint64(b[6:]), binary.LittleEndian.Uint64(b[fakeSeqAt:])
	if string(f.frame(f.key, from, inc, seq)) != string(b) {
		f.rejected["tag"]++
		return 0, 0, false
	}
	if inc < f.latest[from] {
		f.rejected["stale"]++
		return 0, 0, false
	}
	f.accepted++
	f.slots.Store(from, seq)
	return from, inc, true
}

func (f *fakeVerifier) counts() (accepted int, rejected map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := make(map[string]int, len(f.rejected))
	for k, v := range f.rejected {
		r[k] = v
	}
	return f.accepted, r
}

// udpPair returns a bound, non-blocking UDP socket on the loopback and a
// connected socket that sends to it.
func udpPair(t *testing.T) (rx, tx int) {
	t.Helper()
	rx, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(rx) })
	if err := unix.Bind(rx, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	_ = unix.SetsockoptInt(rx, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	sa, err := unix.Getsockname(rx)
	if err != nil {
		t.Fatal(err)
	}
	if tx, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(tx) })
	if err := unix.Connect(tx, sa); err != nil {
		t.Fatal(err)
	}
	return rx, tx
}

// TestNativeVerifiedDatagrams: with Verify, the C thread receives the
// watched emitter's heartbeat datagrams itself and raises its word, after
// the first ones that Go accepted; across several refills of the ring
// nearly none goes to Go. Forged, stale, truncated and overlong datagrams
// and another sender's heartbeats go to Go, which rejects (and counts) or
// stores them as a transport's drain does, and none raises the watched
// word; a replayed old heartbeat raises nothing. A new emitter and a
// restarted one (newer incarnation) are followed.
func TestNativeVerifiedDatagrams(t *testing.T) {
	slots := transport.NewSlots(4)
	fv := newFakeVerifier(slots)
	fv.latest[1] = 5
	rx, tx := udpPair(t)
	drain := func() { // a transport's DrainHeartbeats
		var b [64]byte
		for {
			n, _, err := unix.Recvfrom(rx, b[:], unix.MSG_DONTWAIT|unix.MSG_TRUNC)
			if err != nil {
				return
			}
			fv.HeartbeatDatagram(b[:min(n, len(b))])
		}
	}
	w := heartbeat.NewWatch(slots, 0)
	e, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: int64(500 * time.Microsecond), CPU: -1,
		Send: func(ranks.Rank, uint64) error { return nil }, Sink: func(ranks.Rank) (heartbeat.Sink, bool) { return heartbeat.Sink{}, false },
		Watch: w, Drain: drain, DrainFD: rx, Verify: fv, CheckEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	w.Set(1, mono.Now())
	send := func(b []byte) {
		t.Helper()
		if _, err := unix.Write(tx, b); err != nil {
			t.Fatal(err)
		}
	}
	// Rank 1 starts far from 0, as an emitter that heartbeated others first.
	const first, count = 100_000, 3000
	for s := uint64(first); s < first+count; s++ {
		send(fv.frame(fv.key, 1, 5, s))
		if s%8 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	last := uint64(first + count - 1)
	waitUntil(t, "rank 1's heartbeats stored", func() bool { return slots.Load(1) == last })
	waitUntil(t, "a check records them", func() bool { return w.Record().Seq == last })
	goAccepted, _ := fv.counts()
	st := e.Stats()
	if st.Verified+uint64(goAccepted) != count || goAccepted > count/10 {
		t.Fatalf("%d heartbeats: %d verified by the thread, %d by Go; want nearly all by the thread", count, st.Verified, goAccepted)
	}

	good := func(seq uint64) []byte { return fv.frame(fv.key, 1, 5, seq) }
	cases := []struct {
		name, reason string
		b            []byte
	}{
		{"forged tag", "tag", fv.frame(fv.key+1, 1, 5, last+1)},
		{"flipped bit in the tag", "tag", func() []byte { b := good(last + 1); b[len(b)-1] ^= 1; return b }()},
		{"stale incarnation", "stale", fv.frame(fv.key, 1, 4, last+1)},
		{"shorter", "length", good(last + 1)[:fakeFrameLen-1]},
		{"longer", "length", append(good(last+1), 0)},
		{"much longer", "length", append(good(last+1), make([]byte, 100)...)},
		{"replayed old heartbeat", "", good(first + 10)},
		{"other sender", "", fv.frame(fv.key, 2, 1, last+50)},
	}
	seq := last
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, before := fv.counts()
			v0 := e.Stats().Verified
			word := slots.Load(1)
			send(tc.b)
			seq++
			send(good(seq)) // behind it, the next genuine one
			waitUntil(t, "the genuine heartbeat", func() bool { return slots.Load(1) == seq })
			if _, after := fv.counts(); tc.reason != "" && after[tc.reason] != before[tc.reason]+1 {
				t.Fatalf("rejects %v → %v, want one more %q", before, after, tc.reason)
			}
			if v := e.Stats().Verified; v > v0+1 {
				t.Fatalf("the thread verified %d datagrams, want at most the genuine one", v-v0)
			}
			if word != seq-1 {
				t.Fatalf("word %d before, want %d", word, seq-1)
			}
		})
	}
	// Rank 2 is not the watched emitter: its datagram went to Go, which
	// may store it after the thread stored rank 1's next one.
	waitUntil(t, fmt.Sprintf("rank 2's authentic heartbeat stored as %d", last+50), func() bool { return slots.Load(2) == last+50 })

	// A new emitter, then its restart: after Go accepted the first
	// heartbeats of each, the thread verifies the next ones.
	for _, inc := range []uint64{1, 9} {
		w.Set(2, mono.Now())
		v0 := e.Stats().Verified
		base := slots.Load(2)
		if inc == 9 {
			base += 10_000 // whatever it sends: the window follows
		}
		for s := base + 1; s <= base+200; s++ {
			send(fv.frame(fv.key, 2, inc, s))
			if s%8 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		waitUntil(t, "rank 2's heartbeats", func() bool { return slots.Load(2) == base+200 })
		if v := e.Stats().Verified - v0; v < 100 {
			t.Fatalf("incarnation %d: the thread verified %d of rank 2's 200 heartbeats", inc, v)
		}
	}
	var verified atomic.Uint64
	verified.Store(e.Stats().Verified)
	e.Close()
	if st := e.Stats(); st.Verified != verified.Load() || !st.Native {
		t.Fatalf("stats after Close %+v", st)
	}
}
