package hb

import "math"

// BroadcastTime is B(n) = 8 t log2 n of seed 000 §3.1.2: the time for one
// double hypercube broadcast with interleaved ring messages, t being the
// upper bound on one message's transfer time.
func BroadcastTime(n int, t int64) int64 {
	if n < 2 {
		return 0
	}
	return int64(math.Ceil(8 * float64(t) * math.Log2(float64(n))))
}

// Bound is Theorem 1 of seed 000: with n alive ranks and f ≤ ⌊log2 n⌋−1
// overlapping failures, the ring reconnects and every failure reaches every
// alive rank within
//
//	T(f) = f(f+1)δ + f t + f(f+1)/2 · B(n).
//
// The theorem does not cover larger f; Bound still evaluates the formula.
func Bound(f, n int, delta, t int64) int64 {
	ff := int64(f)
	return ff*(ff+1)*delta + ff*t + ff*(ff+1)/2*BroadcastTime(n, t)
}

// ReconnectBound is R(f) ≤ f(f+1)δ + f t (Lemma 1 by induction): the time
// to reconnect the ring after f overlapping failures.
func ReconnectBound(f int, delta, t int64) int64 {
	ff := int64(f)
	return ff*(ff+1)*delta + ff*t
}

// MaxOverlapping is ⌊log2 n⌋ − 1, the number of overlapping failures
// Theorem 1 covers.
func MaxOverlapping(n int) int {
	if n < 2 {
		return 0
	}
	return int(math.Floor(math.Log2(float64(n)))) - 1
}

// BlockBound is the time until every alive rank knows a block of b
// consecutive ranks that crashed at once, with block mending of window w
// (mend.go), n ranks alive before the crash and t as in Bound:
//
//	T_block(b) = (R+1)δ + t + B(n),  R = ⌈log2(b/w + 1)⌉ probe rounds,
//
// which for b ≤ w is T(1), a single failure's bound (w < 1 counts as 1).
func BlockBound(b, w, n int, delta, t int64) int64 {
	return (blockRounds(b, w)+1)*delta + t + BroadcastTime(n, t)
}

// blockRounds is R = ⌈log2(b/w + 1)⌉, the probe rounds of a block of b
// with window w (w < 1 counts as 1).
func blockRounds(b, w int) int64 {
	w = max(w, 1)
	rounds, covered := int64(1), w // round k probes w·2^(k−1) ranks
	for covered < b {
		covered += w << rounds
		rounds++
	}
	return rounds
}

// HostBlockBound is BlockBound with host labels (RingConfig.Hosts): a block
// of b consecutive ranks that crashed at once and touches hosts hosts,
// each host's ranks being contiguous on the ring. A round probes at least
// the rest of its first candidate's host, so it takes at most hosts rounds
// (and never more than BlockBound's R):
//
//	T_host(b) = (min(hosts, R)+1)δ + t + B(n),
//
// which for a block of whole hosts is 2δ + t + B(n) per host, and for one
// whole host of any size T(1).
func HostBlockBound(b, hosts, w, n int, delta, t int64) int64 {
	rounds := min(blockRounds(b, w), int64(max(hosts, 1)))
	return (rounds+1)*delta + t + BroadcastTime(n, t)
}
