package heartbeat

import (
	"encoding/binary"
	"hash/fnv"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// keyedFrames is a transport's heartbeats for the fuzz target: "hb",
// sender, incarnation, sequence number (at 14), and a keyed hash.
type keyedFrames struct{ slots *transport.Slots }

func keyedFrame(from ranks.Rank, inc, seq uint64) []byte {
	b := make([]byte, 30)
	copy(b, "hb")
	binary.LittleEndian.PutUint32(b[2:], from)
	binary.LittleEndian.PutUint64(b[6:], inc)
	binary.LittleEndian.PutUint64(b[14:], seq)
	h := fnv.New64a()
	h.Write([]byte("key"))
	h.Write(b[:22])
	binary.LittleEndian.PutUint64(b[22:], h.Sum64())
	return b
}

func (k keyedFrames) HeartbeatExpected(from ranks.Rank, inc uint64) (func([]byte, uint64) int, int, *uint64) {
	return func(dst []byte, seq uint64) int { return copy(dst, keyedFrame(from, inc, seq)) }, 14, k.slots.Word(from)
}

func (keyedFrames) HeartbeatDatagram([]byte) (ranks.Rank, uint64, bool) { return 0, 0, false }

// FuzzVerifyDatagram feeds arbitrary datagrams to the native thread's
// comparison: it accepts one only when it is exactly the expected frame of
// the sequence number it carries, inside the window after the word (base+1 to base+VG_RING-1).
func FuzzVerifyDatagram(f *testing.F) {
	const base = 1000
	slots := transport.NewSlots(4)
	slots.Store(1, base)
	v := newVerifier(keyedFrames{slots})
	defer v.free()
	v.follow(1, 5)
	f.Add(keyedFrame(1, 5, base+1))
	f.Add(keyedFrame(1, 5, base+1023))
	f.Add(keyedFrame(1, 5, base+1024))
	f.Add(keyedFrame(1, 5, base))
	f.Add(keyedFrame(1, 4, base+1))
	f.Add(keyedFrame(2, 5, base+1))
	f.Add(keyedFrame(1, 5, 0))
	f.Add(append(keyedFrame(1, 5, base+2), 0))
	f.Add(keyedFrame(1, 5, base+3)[:29])
	f.Fuzz(func(t *testing.T, b []byte) {
		seq := v.match(b)
		if seq == 0 {
			if len(b) == 30 && string(b) == string(keyedFrame(1, 5, binary.LittleEndian.Uint64(b[14:]))) {
				if s := binary.LittleEndian.Uint64(b[14:]); s > base && s <= base+1023 {
					t.Fatalf("the expected frame of %d refused", s)
				}
			}
			return
		}
		if seq <= base || seq > base+1023 || string(b) != string(keyedFrame(1, 5, seq)) {
			t.Fatalf("accepted %x as heartbeat %d", b, seq)
		}
	})
}
