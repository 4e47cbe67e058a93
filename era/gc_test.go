package era

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

// fastNet delivers messages directly (no encoding, no failures) in FIFO or
// random order; it drives the long-running and benchmark loops.
type fastNet struct {
	cores  []*Core
	q      []pmsg
	head   int
	rng    *rand.Rand // nil: FIFO
	steps  int
	decide func(p ranks.Rank, d *Decision)
}

func newFastNet(n int, tree Tree, op Op, rng *rand.Rand) *fastNet {
	f := &fastNet{rng: rng}
	for p := range n {
		f.cores = append(f.cores, NewCore(ranks.Rank(p), n, tree, op))
	}
	return f
}

func (f *fastNet) apply(p ranks.Rank, outs []Out) {
	for _, o := range outs {
		if o.Decided != nil {
			if f.decide != nil {
				f.decide(p, o.Decided)
			}
			continue
		}
		f.q = append(f.q, pmsg{p, o.To, o.Msg})
	}
}

func (f *fastNet) start(p ranks.Rank, id ID, v []byte) {
	f.steps++
	outs, err := f.cores[p].Start(id, Contribution{Value: v})
	if err != nil {
		panic(err)
	}
	f.apply(p, outs)
}

// step delivers one message and reports whether there was one.
func (f *fastNet) step() bool {
	if f.head == len(f.q) {
		f.q, f.head = f.q[:0], 0
		return false
	}
	var x pmsg
	if f.rng != nil {
		i := f.head + f.rng.IntN(len(f.q)-f.head)
		x = f.q[i]
		f.q[i] = f.q[f.head]
	} else {
		x = f.q[f.head]
	}
	f.q[f.head] = pmsg{}
	f.head++
	f.steps++
	f.apply(x.to, f.cores[x.to].Step(x.from, x.m))
	return true
}

// TestBoundedMemory runs 100,000 agreements in a row among a few ranks:
// the collection bound of Section 4 keeps the records of every core under a
// small constant, with agreements run one after the other and pipelined
// (each process keeps window agreements started ahead).
func TestBoundedMemory(t *testing.T) {
	total := 100_000
	if testing.Short() {
		total = 20_000
	}
	for _, tc := range []struct {
		name   string
		n      int
		window int
		limit  int
	}{
		{"sequential", 3, 1, 3},
		{"pipelined", 4, 3, 18},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.n
			f := newFastNet(n, Binary(n), BitAND, rand.New(rand.NewPCG(21, 22)))
			next := make([]int, n) // next agreement each process starts
			decided := make([]int, n)
			first := map[uint64][]byte{}
			f.decide = func(p ranks.Rank, d *Decision) {
				k := d.ID.Seq
				want := U64(^uint64(0))
				for q := range uint64(n) {
					want = BitAND.Merge(want, U64(k^q))
				}
				if !bytes.Equal(d.Value, want) {
					t.Fatalf("agreement %d decided %x, want %x", k, d.Value, want)
				}
				if f, ok := first[k]; ok && !bytes.Equal(f, d.Value) {
					t.Fatalf("agreement %d: %x vs %x", k, f, d.Value)
				}
				first[k] = d.Value
				if len(first) > 4*tc.window+8 {
					for s := range first {
						if s+uint64(2*tc.window+4) < k {
							delete(first, s)
						}
					}
				}
				decided[p]++
				if next[p] < total {
					f.start(p, ID{Epoch: 3, Seq: uint64(next[p])}, U64(uint64(next[p])^uint64(p)))
					next[p]++
				}
			}
			for p := range n {
				for range tc.window {
					f.start(ranks.Rank(p), ID{Epoch: 3, Seq: uint64(next[p])}, U64(uint64(next[p])^uint64(p)))
					next[p]++
				}
			}
			maxRec := 0
			for f.step() {
				for _, c := range f.cores {
					maxRec = max(maxRec, c.Stats().Records)
				}
				if maxRec > tc.limit {
					t.Fatalf("after %d agreements a core holds %d records", decided[0], maxRec)
				}
			}
			for p, d := range decided {
				if d != total {
					t.Fatalf("rank %d decided %d agreements, want %d", p, d, total)
				}
			}
			t.Logf("%d agreements, %d steps, at most %d records per core", total, f.steps, maxRec)
		})
	}
}
