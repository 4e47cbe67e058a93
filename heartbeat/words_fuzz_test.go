package heartbeat_test

import (
	"encoding/binary"
	"testing"

	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/transport"
)

// FuzzSharedWord writes arbitrary values into the watched emitter's word
// between checks, as any process that mapped the observer's shared-memory
// region can (transport/shm): whatever the values, the checks' record
// holds the largest value seen, its growth time moves exactly when a check
// sees a larger one, and a silence is timed from the last growth.
func FuzzSharedWord(f *testing.F) {
	seed := func(vs ...uint64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		return b
	}
	f.Add(seed(1, 2, 3, 4))
	f.Add(seed(5, 1, 0, ^uint64(0), 3))
	f.Add(seed(0, 0, 7, 7, 6))
	f.Fuzz(func(t *testing.T, b []byte) {
		slots := transport.NewSlots(2)
		w := heartbeat.NewWatch(slots, 0)
		w.Set(0, 0)
		var best uint64
		grew := int64(0)
		for i := 0; i+8 <= len(b) && i < 8*256; i += 8 {
			v := binary.LittleEndian.Uint64(b[i:])
			*slots.Word(0) = v // a raw store: no maximum, as a foreign writer may do
			now := int64(i/8+1) * 10
			w.Check(now)
			if v > best {
				best, grew = v, now
			}
			r := w.Record()
			if r.Emitter != 0 || r.Seq != best || r.GrewAt != grew || r.CheckedAt != now {
				t.Fatalf("after %d at %d: record %+v, want seq %d grown at %d", v, now, r, best, grew)
			}
		}
	})
}
