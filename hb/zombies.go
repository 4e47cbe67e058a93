package hb

import (
	"slices"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
)

// EvictInterval is the least time between two EVICTED notices to one zombie.
const EvictInterval = 100 * time.Millisecond

// Zombies enforces fail-stop on ranks held dead (seed 000 assumes crash
// failures). It remembers each rank's heartbeat word as first seen after
// the rank joined D; a word that grows afterwards belongs to a rank that
// resumed (after a SIGSTOP, a long swap-out…) and must be told it is
// evicted. It also rate-limits those notices. The words are inputs (Saw):
// it reads no memory. The zero value is not usable: use NewZombies. Not
// safe for concurrent use: it belongs to one event loop.
type Zombies struct {
	seq map[ranks.Rank]uint64 // word of each rank held dead, as last seen
	// The ranks held whose word was not seen yet, nFresh of them, are
	// order in the order held while there are at most smallFresh; past
	// that, fresh marks them, one bit a rank, and order also keeps ranks
	// seen since, which Fresh drops: every operation is O(1) a rank, and
	// a tracker that never holds many (a simulated job holds thousands)
	// allocates no bitset.
	order  []ranks.Rank
	nFresh int
	fresh  []uint64
	sent   map[ranks.Rank]int64 // when each was last told it is evicted
	n      int                  // ranks of the job, 0 if unknown
	sorted []ranks.Rank         // the ranks held, sorted, as Ranks last saw them
}

// smallFresh is the most fresh ranks a Zombies keeps without its bitset.
const smallFresh = 64

// NewZombies returns an empty tracker for a job of n ranks (0 if
// unknown): past smallFresh fresh ranks, its bitset of them takes n/8
// bytes, in one allocation (grown as needed without n).
func NewZombies(n int) *Zombies {
	return &Zombies{seq: map[ranks.Rank]uint64{}, sent: map[ranks.Rank]int64{}, n: n}
}

// isFresh reports whether r is held and its word not seen yet.
func (z *Zombies) isFresh(r ranks.Rank) bool {
	if z.fresh == nil {
		return slices.Contains(z.order, r) // at most smallFresh
	}
	return int(r/64) < len(z.fresh) && z.fresh[r/64]&(1<<(r%64)) != 0
}

// mark sets r's bit in fresh, growing it as needed.
func (z *Zombies) mark(r ranks.Rank) {
	if w := int(r/64) + 1; w > len(z.fresh) {
		if z.fresh == nil && w <= (z.n+63)/64 {
			z.fresh = make([]uint64, (z.n+63)/64)
		} else {
			z.fresh = append(z.fresh, make([]uint64, w-len(z.fresh))...)
		}
	}
	z.fresh[r/64] |= 1 << (r % 64)
}

// Hold records r as dead: the first word Saw gives for it is where its
// growth counts from.
func (z *Zombies) Hold(r ranks.Rank) {
	if z.Held(r) {
		return
	}
	z.order = append(z.order, r)
	z.nFresh++
	switch {
	case z.fresh != nil:
		z.mark(r)
	case z.nFresh > smallFresh:
		for _, x := range z.order {
			z.mark(x)
		}
	}
}

// seen records that r's word was seen: r is not fresh any more.
func (z *Zombies) seen(r ranks.Rank) {
	z.nFresh--
	if z.fresh == nil {
		z.order = slices.DeleteFunc(z.order, func(x ranks.Rank) bool { return x == r })
		return
	}
	z.fresh[r/64] &^= 1 << (r % 64)
}

// Len returns the number of ranks held.
func (z *Zombies) Len() int { return len(z.seq) + z.nFresh }

// Held reports whether r is held dead.
func (z *Zombies) Held(r ranks.Rank) bool {
	if _, ok := z.seq[r]; ok {
		return true
	}
	return z.isFresh(r)
}

// Fresh returns the ranks held whose word was not seen yet, in the order
// they were held (nil if none).
func (z *Zombies) Fresh() []ranks.Rank {
	if z.nFresh == 0 {
		z.order = z.order[:0]
		return nil
	}
	if z.fresh != nil {
		z.order = slices.DeleteFunc(z.order, func(r ranks.Rank) bool { return !z.isFresh(r) })
	}
	return slices.Clone(z.order)
}

// Ranks returns every rank held, in increasing order. The order is kept
// between calls and sorted again only after a Hold (a rank held stays
// held, so the count tells): the zombie check asks every housekeeping
// period, and the ranks held change only when deaths are learned.
func (z *Zombies) Ranks() []ranks.Rank {
	if len(z.sorted) != z.Len() {
		rs := make([]ranks.Rank, 0, z.Len())
		for r := range z.seq {
			rs = append(rs, r)
		}
		for _, r := range z.order {
			if z.isFresh(r) {
				rs = append(rs, r)
			}
		}
		slices.Sort(rs)
		z.sorted = rs
	}
	return slices.Clone(z.sorted)
}

// Saw takes the heartbeat words of ranks rs (words[i] of rs[i]) and
// returns the ranks held dead whose word grew since it was last seen (nil
// if none). A rank's first word is remembered only; a rank not held is
// ignored.
func (z *Zombies) Saw(rs []ranks.Rank, words []uint64) []ranks.Rank {
	var moved []ranks.Rank
	for i, r := range rs[:min(len(rs), len(words))] {
		if z.isFresh(r) {
			z.seen(r)
			z.seq[r] = words[i]
			continue
		}
		if seq, ok := z.seq[r]; ok && words[i] > seq {
			z.seq[r] = words[i]
			moved = append(moved, r)
		}
	}
	if z.nFresh == 0 {
		z.order = z.order[:0]
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
