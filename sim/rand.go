package sim

import (
	"math"
	"math/rand/v2"
)

// mix64 is the splitmix64 finalizer: a bijective 64-bit mixer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hash3 mixes three words into one. It is the counter-based generator behind
// the heartbeat delays: a heartbeat's delay is a pure function of the seed,
// the emitter and the sequence number, so the full and the skipping
// heartbeat modes see the same delays without drawing them in the same
// order.
func hash3(a, b, c uint64) uint64 {
	return mix64(a + mix64(b+0x9e3779b97f4a7c15+mix64(c+0x632be59bd9b4e019)))
}

// Stream numbers: every source of randomness of a run draws from its own
// stream, so that adding draws to one (say, heartbeats) never shifts another.
const (
	streamNet uint64 = iota + 1
	streamFailures
	streamPhases
	streamHeartbeat
	streamGossip // reserved (the gossip cores draw from their own seeds): the later streams keep their numbers
	streamRoot
	streamProbe
)

// newRand returns a PCG generator for one stream of one seed.
func newRand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(mix64(seed), mix64(stream^0x5851f42d4c957f2d)))
}

// RunSeed derives the seed of run number run of an experiment seeded with
// seed. Runs are independent and can execute in any order or in parallel
// with the same results.
func RunSeed(seed uint64, run int) uint64 {
	return mix64(mix64(seed) ^ (uint64(run)+1)*0x9e3779b97f4a7c15)
}

// uniformDelay returns a delay uniform in (0, t] (integer nanoseconds in
// [1, t]), the one-port model's transfer time.
func uniformDelay(r *rand.Rand, t int64) int64 {
	if t <= 1 {
		return 1
	}
	return 1 + r.Int64N(t)
}

// expTime draws an exponential time of rate lambda per nanosecond.
func expTime(r *rand.Rand, lambda float64) int64 {
	x := r.ExpFloat64() / lambda
	if x > math.MaxInt64/4 {
		return math.MaxInt64 / 4
	}
	return int64(math.Ceil(x))
}
