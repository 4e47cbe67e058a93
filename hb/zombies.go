package hb

import (
	"time"

	"github.com/vigil-hpc/vigil/ranks"
)

// EvictInterval is the least time between two EVICTED notices to one zombie.
const EvictInterval = 100 * time.Millisecond

// Zombies enforces fail-stop on ranks held dead (seed 000 assumes crash
// failures). It remembers each rank's heartbeat word when the rank joined D;
// a word that grows afterwards belongs to a rank that resumed (after a
// SIGSTOP, a long swap-out…) and must be told it is evicted. It also
// rate-limits those notices. The zero value is not usable: use NewZombies.
// Not safe for concurrent use: it belongs to one event loop.
type Zombies struct {
	seq  map[ranks.Rank]uint64 // word of each rank held dead, as last seen
	sent map[ranks.Rank]int64  // when each was last told it is evicted
}

// NewZombies returns an empty tracker.
func NewZombies() *Zombies {
	return &Zombies{seq: map[ranks.Rank]uint64{}, sent: map[ranks.Rank]int64{}}
}

// Hold records r as dead, with seq its heartbeat word at that moment.
func (z *Zombies) Hold(r ranks.Rank, seq uint64) { z.seq[r] = seq }

// Len returns the number of ranks held.
func (z *Zombies) Len() int { return len(z.seq) }

// Held reports whether r is held dead.
func (z *Zombies) Held(r ranks.Rank) bool {
	_, ok := z.seq[r]
	return ok
}

// Moved returns the ranks held dead whose word in slots grew since the last
// look (nil if none), and remembers the new words.
func (z *Zombies) Moved(slots interface{ Load(ranks.Rank) uint64 }) []ranks.Rank {
	var moved []ranks.Rank
	for r, seq := range z.seq {
		if cur := slots.Load(r); cur > seq {
			z.seq[r] = cur
			moved = append(moved, r)
		}
	}
	return moved
}

// Due reports whether an EVICTED notice to r may be sent at now (monotonic
// ns): none was sent in the last EvictInterval. A true answer counts as sent.
func (z *Zombies) Due(r ranks.Rank, now int64) bool {
	if last, ok := z.sent[r]; ok && now-last < int64(EvictInterval) {
		return false
	}
	z.sent[r] = now
	return true
}
