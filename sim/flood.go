package sim

import (
	"fmt"
	"math"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
)

// FloodTable holds the forwarding lists of a forward-once flooding overlay
// for a broadcast from rank 0 over m participants and no known dead, as the
// overlay's own Neighbors computes them. HBA, BMG and Binomial label the
// participants relative to the source and BIG is invariant under rotation,
// so a broadcast from any source with any set of unknown dead ranks is the
// broadcast from 0 with the dead ranks rotated: one table serves every run.
type FloodTable struct {
	Name string
	M    int
	off  []int32
	to   []uint32
}

// NewFloodTable asks o for the forwarding list of every rank.
func NewFloodTable(o bcast.Overlay, m int) *FloodTable {
	t := &FloodTable{Name: o.Name(), M: m, off: make([]int32, m+1)}
	for x := range m {
		nb := o.Neighbors(ranks.Rank(x), 0, m, nil)
		for _, y := range nb {
			t.to = append(t.to, uint32(y))
		}
		t.off[x+1] = int32(len(t.to))
	}
	return t
}

// Edges returns the total number of forwarding links.
func (t *FloodTable) Edges() int { return len(t.to) }

// LogPUnits is a LogP model in integer time units (seed 002 takes L a
// multiple of o; with L = 2 µs and o = 1 µs the unit is 1 µs).
type LogPUnits struct {
	L, O, G int32
}

// gap is the time between two send starts.
func (u LogPUnits) gap() int32 { return max(u.O, u.G) }

// Units converts a LogP model to integer units of unit nanoseconds.
func (m LogP) Units(unit int64) (LogPUnits, error) {
	if unit <= 0 || m.L%unit != 0 || m.O%unit != 0 || m.G%unit != 0 || m.RecvContention {
		return LogPUnits{}, fmt.Errorf("sim: %v is not a multiple of %d ns without receive contention", m, unit)
	}
	return LogPUnits{L: int32(m.L / unit), O: int32(m.O / unit), G: int32(m.G / unit)}, nil
}

// floodOutcome is one broadcast's result in the fast kernels. Times are in
// units.
type floodOutcome struct {
	latency    int32 // last first delivery among alive participants
	completion int32 // last time an alive node was done (sending, or exiting)
	msgs       int64
	reached    int32 // alive participants other than the root that delivered
	alive      int32 // alive participants other than the root
}

const never = math.MaxInt32

// flooder runs forward-once floods over a FloodTable in LogP without
// receive contention: a node that first delivers at time a sends its i-th
// message (i from 0) at a + i·gap, delivered at a + i·gap + 2o + L, unless
// it crashed before a + i·gap + o. First deliveries are shortest paths,
// computed with a bucket queue; duplicates cost nothing but their count.
type flooder struct {
	t       *FloodTable
	u       LogPUnits
	arr     []int32
	buckets [][]uint32
}

func newFlooder(t *FloodTable, u LogPUnits) *flooder {
	maxDeg := int32(0)
	for x := range t.M {
		maxDeg = max(maxDeg, t.off[x+1]-t.off[x])
	}
	span := int(maxDeg*u.gap()+2*u.O+u.L) + 1
	return &flooder{t: t, u: u, arr: make([]int32, t.M), buckets: make([][]uint32, span)}
}

// run floods from rank 0; death[x] is when x crashes (0 or less: dead from
// the start, never: alive). Recv times are left in f.arr (never if none).
func (f *flooder) run(death []int32) floodOutcome {
	t, u := f.t, f.u
	gap, hop := u.gap(), 2*u.O+u.L
	for i := range f.arr {
		f.arr[i] = never
	}
	f.arr[0] = 0
	nb := len(f.buckets)
	f.buckets[0] = append(f.buckets[0][:0], 0)
	var out floodOutcome
	pending := 1
	for now := int32(0); pending > 0; now++ {
		b := &f.buckets[int(now)%nb]
		for k := 0; k < len(*b); k++ {
			x := (*b)[k]
			pending--
			if f.arr[x] != now {
				continue // reached earlier
			}
			dx := death[x]
			lo, hi := t.off[x], t.off[x+1]
			done := now
			for i := lo; i < hi; i++ {
				st := now + (i-lo)*gap
				if st+u.O >= dx {
					break // crashed before done sending
				}
				out.msgs++
				done = st + u.O
				y := t.to[i]
				at := st + hop
				if at < f.arr[y] && at < death[y] {
					f.arr[y] = at
					nb2 := &f.buckets[int(at)%nb]
					*nb2 = append(*nb2, y)
					pending++
				}
			}
			if dx == never {
				out.completion = max(out.completion, done)
			}
		}
		*b = (*b)[:0]
	}
	for x := 1; x < t.M; x++ {
		if death[x] != never {
			continue
		}
		out.alive++
		if a := f.arr[x]; a != never {
			out.reached++
			out.latency = max(out.latency, a)
		}
	}
	return out
}
