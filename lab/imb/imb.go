package imb

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// Load names an IMB-MPI1 benchmark.
type Load string

// The IMB-MPI1 benchmarks implemented, with IMB's definitions:
//   - PingPong: rank 0 sends, rank 1 returns the message; t = half a round trip.
//   - PingPing: ranks 0 and 1 send to each other at the same time; t per exchange.
//   - Sendrecv: a periodic chain; every rank sends right and receives left.
//   - Exchange: every rank sends to and receives from both neighbours.
//   - Bcast: the root changes every repetition (root = i mod n).
//   - Allreduce: sum of float32 vectors of the message size.
//   - Barrier: no payload.
const (
	PingPong  Load = "PingPong"
	PingPing  Load = "PingPing"
	Sendrecv  Load = "Sendrecv"
	Exchange  Load = "Exchange"
	Bcast     Load = "Bcast"
	Allreduce Load = "Allreduce"
	Barrier   Load = "Barrier"
)

// Loads lists every load in IMB's order.
var Loads = []Load{PingPong, PingPing, Sendrecv, Exchange, Bcast, Allreduce, Barrier}

// ParseLoad returns the load named s (case-sensitive, IMB's spelling).
func ParseLoad(s string) (Load, error) {
	if slices.Contains(Loads, Load(s)) {
		return Load(s), nil
	}
	return "", fmt.Errorf("imb: unknown load %q (want one of %v)", s, Loads)
}

// IMB's repetition rule.
const (
	// IMBMaxReps is IMB's default repetition count for small messages.
	IMBMaxReps = 1000
	// IMBOverall is the byte budget per size: repetitions = min(1000, 40 MiB / size).
	IMBOverall = 40 << 20
	// IMBMaxSize is the largest default message size (4 MiB).
	IMBMaxSize = 4 << 20
)

// IMBSizes returns IMB's default message sizes, 0 and 1 B to maxSize in
// powers of two.
func IMBSizes(maxSize int) []int {
	s := []int{0}
	for b := 1; b <= maxSize; b *= 2 {
		s = append(s, b)
	}
	return s
}

// IMBReps is IMB's repetition count for a message size, capped by maxReps
// when maxReps > 0 (min(maxReps, 40 MiB / size), at least 1).
func IMBReps(size, maxReps int) int {
	if maxReps <= 0 {
		maxReps = IMBMaxReps
	}
	if size == 0 {
		return maxReps
	}
	return max(1, min(maxReps, IMBOverall/size))
}

// Sized reports whether the load takes a message size (Barrier does not).
func (l Load) Sized() bool { return l != Barrier }

// Result is one line of an IMB table.
type Result struct {
	Load  Load
	Ranks int
	Size  int
	Reps  int
	RankTimes
}

// RunOptions bounds a Go IMB run.
type RunOptions struct {
	// Sizes are the message sizes (default IMBSizes(IMBMaxSize)).
	Sizes []int
	// MaxReps caps the repetitions (default IMBMaxReps).
	MaxReps int
	// TimeLimit cuts the repetitions of one size so that it lasts about
	// this long, estimated from the warm-up as IMB's -time does (0: 10 s).
	TimeLimit time.Duration
}

func (o RunOptions) withDefaults() RunOptions {
	if len(o.Sizes) == 0 {
		o.Sizes = IMBSizes(IMBMaxSize)
	}
	if o.MaxReps <= 0 {
		o.MaxReps = IMBMaxReps
	}
	if o.TimeLimit <= 0 {
		o.TimeLimit = 10 * time.Second
	}
	return o
}

// warmups is the number of untimed repetitions before each size.
const warmups = 4

// RunIMB runs load on comm (every rank of the group calls it with the same
// arguments) and returns, on rank 0, one Result per size; other ranks get
// nil. Times are per repetition, reduced across ranks as IMB does.
func RunIMB(c Comm, load Load, opt RunOptions) ([]Result, error) {
	opt = opt.withDefaults()
	n := c.Size()
	if (load == PingPong || load == PingPing) && n < 2 {
		return nil, fmt.Errorf("imb: %s needs at least 2 ranks, have %d", load, n)
	}
	sizes := opt.Sizes
	if !load.Sized() {
		sizes = []int{0}
	}
	var out []Result
	for _, size := range sizes {
		if size < 0 {
			return nil, fmt.Errorf("imb: message size %d < 0", size)
		}
		op, active := kernel(c, load, size)
		reps := IMBReps(size, opt.MaxReps)
		// Warm-up, timed to cut the repetitions to the time limit; rank 0
		// decides and tells everyone.
		if err := barrier(c); err != nil {
			return nil, err
		}
		t0 := time.Now()
		for i := range warmups {
			if active {
				if err := op(i); err != nil {
					return nil, err
				}
			}
		}
		per := time.Since(t0) / warmups
		if per > 0 {
			reps = max(1, min(reps, int(opt.TimeLimit/per)))
		}
		var rb [8]byte
		binary.LittleEndian.PutUint64(rb[:], uint64(reps))
		if err := bcastBytes(c, 0, rb[:]); err != nil {
			return nil, err
		}
		reps = int(binary.LittleEndian.Uint64(rb[:]))

		if err := barrier(c); err != nil {
			return nil, err
		}
		t0 = time.Now()
		if active {
			for i := range reps {
				if err := op(i); err != nil {
					return nil, err
				}
			}
		}
		t := time.Since(t0) / time.Duration(reps)
		if load == PingPong {
			t /= 2
		}
		if !active {
			t = -1
		}
		ts, err := gatherDurations(c, t)
		if err != nil {
			return nil, err
		}
		if c.Rank() == 0 {
			var act []time.Duration
			for _, d := range ts {
				if d >= 0 {
					act = append(act, d)
				}
			}
			out = append(out, Result{Load: load, Ranks: n, Size: size, Reps: reps, RankTimes: AcrossRanks(act)})
		}
	}
	return out, nil
}

// kernel returns one repetition of load at size for this rank, and whether
// this rank takes part (PingPong and PingPing use ranks 0 and 1 only).
func kernel(c Comm, load Load, size int) (func(i int) error, bool) {
	r, n := c.Rank(), c.Size()
	buf := make([]byte, size)
	left, right := (r-1+n)%n, (r+1)%n
	switch load {
	case PingPong:
		return func(int) error {
			if r == 0 {
				if err := c.Send(1, buf); err != nil {
					return err
				}
				_, err := c.Recv(1)
				return err
			}
			m, err := c.Recv(0)
			if err != nil {
				return err
			}
			return c.Send(0, m)
		}, r < 2
	case PingPing:
		return func(int) error {
			if err := c.Send(1-r, buf); err != nil {
				return err
			}
			_, err := c.Recv(1 - r)
			return err
		}, r < 2
	case Sendrecv:
		return func(int) error {
			if err := c.Send(right, buf); err != nil {
				return err
			}
			_, err := c.Recv(left)
			return err
		}, true
	case Exchange:
		return func(int) error {
			if err := c.Send(left, buf); err != nil {
				return err
			}
			if err := c.Send(right, buf); err != nil {
				return err
			}
			if _, err := c.Recv(left); err != nil {
				return err
			}
			_, err := c.Recv(right)
			return err
		}, true
	case Bcast:
		return func(i int) error { return bcastBytes(c, i%n, buf) }, true
	case Allreduce:
		vec := make([]float32, size/4)
		for i := range vec {
			vec[i] = float32(r)
		}
		return func(int) error { return allreduceSum(c, vec) }, true
	default: // Barrier
		return func(int) error { return barrier(c) }, true
	}
}

// RankTimes is IMB's reduction of one measurement across ranks: each rank
// times its own repetitions, and the report gives the fastest, slowest and
// mean rank.
type RankTimes struct {
	TMin, TMax, TAvg time.Duration
}

// AcrossRanks reduces per-rank times (one per participating rank) as IMB
// does. It returns the zero value for no ranks.
func AcrossRanks(perRank []time.Duration) RankTimes {
	if len(perRank) == 0 {
		return RankTimes{}
	}
	rt := RankTimes{TMin: perRank[0], TMax: perRank[0]}
	var sum time.Duration
	for _, t := range perRank {
		rt.TMin, rt.TMax = min(rt.TMin, t), max(rt.TMax, t)
		sum += t
	}
	rt.TAvg = sum / time.Duration(len(perRank))
	return rt
}
