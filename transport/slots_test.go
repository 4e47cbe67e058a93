package transport_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/transport"
)

func TestSlots(t *testing.T) {
	s := transport.NewSlots(4)
	if !s.Store(2, 5) || s.Load(2) != 5 {
		t.Fatal("store/load")
	}
	s.Store(2, 3) // a late heartbeat never moves the word back
	if s.Load(2) != 5 {
		t.Fatal("word moved backwards")
	}
	if s.Store(9, 1) || s.Load(9) != 0 {
		t.Fatal("unknown emitter accepted")
	}
}

// BenchmarkObserverCheck is the observer's whole per-check cost: one
// atomic load of the slot, the record a check keeps, and the core's
// comparison.
func BenchmarkObserverCheck(b *testing.B) {
	s := transport.NewSlots(64)
	r, _ := hb.NewRing(hb.RingConfig{Self: 1, N: 64, Delta: 1 << 40})
	r.Start(0, 1<<40)
	rec := hb.WatchRecord{Emitter: r.Emitter()}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Store(0, uint64(i/4))
		if w := s.Load(rec.Emitter); w > rec.Seq {
			rec.Seq, rec.GrewAt = w, int64(i)
		}
		rec.CheckedAt = int64(i)
		r.Observe(int64(i), rec)
	}
}
