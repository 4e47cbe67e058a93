package hostile

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/vigil-hpc/vigil/internal/wire"
)

// Junk returns count datagrams of heartbeat size, in turn: random bytes, a
// heartbeat header of job (from rank i mod n) with random payload and tag,
// and the same header for the job after job.
func Junk(job uint64, n, count int) [][]byte {
	out := make([][]byte, 0, count)
	for i := range count {
		b := make([]byte, wire.HeartbeatFrameSize)
		_, _ = rand.Read(b)
		if i%3 != 0 {
			b[0], b[1], b[2], b[3] = 'V', 'G', wire.Version, byte(wire.Heartbeat)
			binary.LittleEndian.PutUint64(b[4:], job+uint64(i%3-1)) // this job's, or the next one's
			binary.LittleEndian.PutUint32(b[12:], uint32(i%n))
			binary.LittleEndian.PutUint32(b[24:], wire.HeartbeatPayloadSize)
		}
		out = append(out, b)
	}
	return out
}
