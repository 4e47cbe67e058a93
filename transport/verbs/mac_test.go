package verbs

import (
	"testing"

	"github.com/vigil-hpc/vigil/internal/wire"
)

// BenchmarkDatagramMAC is what authentication costs one small message
// datagram: the sender's tag (Codec.Append of a Msg frame) and the
// receiver's check (Codec.Decode), with the datagrams' SipHash-2-4-128
// and with HMAC-SHA256 (the TCP transport's). lab/rxe/run.sh sets both against
// the message one-way latency measured in the same guest.
func BenchmarkDatagramMAC(b *testing.B) {
	for _, m := range []struct {
		name string
		mac  wire.MAC
	}{{"siphash", wire.MACSipHash}, {"hmac", wire.MACHMACSHA256}} {
		b.Run(m.name, func(b *testing.B) {
			p := wire.Params{JobID: 1, Key: testKey, Rank: 0, N: 2, MaxPayload: 1024, MAC: m.mac}
			tx := wire.NewCodec(p)
			p.Rank = 1
			rx := wire.NewCodec(p)
			payload := appendData(nil, flagLast, 1, 1, 0, make([]byte, 32))
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = tx.Append(buf[:0], wire.Msg, payload); err != nil {
					b.Fatal(err)
				}
				if _, _, err := rx.Decode(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
