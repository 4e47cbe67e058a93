package hb

import (
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

// words stands for an observer's heartbeat words: the largest sequence
// number stored for each emitter.
type words []uint64

func (w words) Load(emitter ranks.Rank) uint64 { return w[emitter] }

func (w words) Store(emitter ranks.Rank, seq uint64) { w[emitter] = max(w[emitter], seq) }

func TestZombiesMovedWordsOnly(t *testing.T) {
	s := make(words, 4)
	s.Store(1, 7)
	s.Store(2, 3)
	z := NewZombies()
	if z.Moved(s) != nil || z.Held(1) {
		t.Fatal("an empty tracker reports a zombie")
	}
	z.Hold(1, s.Load(1))
	z.Hold(2, s.Load(2))
	if !z.Held(1) || !z.Held(2) || z.Held(3) {
		t.Fatal("Held does not match Hold")
	}
	if m := z.Moved(s); m != nil {
		t.Fatalf("no word moved, Moved = %v", m)
	}
	s.Store(2, 4)
	s.Store(3, 9) // not held dead: never a zombie
	if m := z.Moved(s); !slices.Equal(m, []ranks.Rank{2}) {
		t.Fatalf("Moved = %v, want [2]", m)
	}
	if m := z.Moved(s); m != nil {
		t.Fatalf("the same word reported twice: %v", m)
	}
}

func TestZombiesDueRateLimits(t *testing.T) {
	z := NewZombies()
	const ms = int64(1e6)
	if !z.Due(5, 1000*ms) {
		t.Fatal("first notice not due")
	}
	if z.Due(5, 1000*ms+int64(EvictInterval)-1) {
		t.Fatal("second notice due within EvictInterval")
	}
	if !z.Due(6, 1000*ms) {
		t.Fatal("the limit must be per rank")
	}
	if !z.Due(5, 1000*ms+int64(EvictInterval)) {
		t.Fatal("notice not due after EvictInterval")
	}
}
