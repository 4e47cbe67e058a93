package bcast

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

// envelope is a message in flight in the simulator; a run carries a
// single broadcast, so the message itself is not copied into it.
type envelope struct {
	to  ranks.Rank
	hop int32 // hops from the source
}

// simRun describes one broadcast in the simulator.
type simRun struct {
	n      int
	o      Overlay
	source ranks.Rank
	D      ranks.Set
	// failing maps each participant that fails during the broadcast to the
	// number of ranks of its forward list it sends before dying (clamped
	// to the list's length; -1 means a random prefix).
	failing map[ranks.Rank]int
	// sync delivers in FIFO (synchronous rounds: hop h before hop h+1);
	// otherwise a random message in flight is delivered next.
	sync bool
	// knowFailing makes every node pass a random subset of the failing
	// ranks, plus D, as its localDead.
	knowFailing bool
	// nodes, if set, are the n Broadcasters to reuse (one per rank);
	// otherwise the run makes fresh ones.
	nodes []*Broadcaster
}

// simResult is what each rank saw.
type simResult struct {
	firsts  []int // first == true receptions per rank
	hop     []int // hop of the first reception, -1 if none
	maxHop  int
	sent    int
	crashed []bool
}

// simulate runs one broadcast, one Broadcaster per rank, and fails the test
// on any error or on a message addressed to a rank outside A.
func simulate(t testing.TB, rng *rand.Rand, r simRun) simResult {
	t.Helper()
	nodes := r.nodes
	if nodes == nil {
		nodes = newNodes(r.n, r.o)
	}
	localDead := make([]*ranks.Set, r.n)
	if r.knowFailing {
		for i := range localDead {
			s := r.D.Clone()
			for f := range r.failing {
				if rng.IntN(2) == 0 {
					s.Add(f)
				}
			}
			localDead[i] = &s
		}
	}
	res := simResult{firsts: make([]int, r.n), hop: make([]int, r.n), crashed: make([]bool, r.n)}
	for i := range res.hop {
		res.hop[i] = -1
	}
	for _, d := range r.D.Members() {
		res.crashed[d] = true
	}
	res.hop[r.source] = 0
	m, to := nodes[r.source].Start(Failed, []ranks.Rank{ranks.Rank(r.n - 1)}, r.D, 0)
	var queue []envelope
	for _, x := range to {
		queue = append(queue, envelope{x, 1})
	}
	res.sent = len(to)
	for head := 0; head < len(queue); {
		var e envelope
		if r.sync {
			e = queue[head]
			head++
		} else {
			i := head + rng.IntN(len(queue)-head)
			e = queue[i]
			queue[i] = queue[head]
			head++
		}
		if e.to >= ranks.Rank(r.n) || r.D.Has(e.to) {
			t.Fatalf("%s n=%d D=%v s=%d: message sent to non-participant %d", r.o.Name(), r.n, r.D, r.source, e.to)
		}
		if res.crashed[e.to] {
			continue
		}
		first, fwd, err := nodes[e.to].Receive(m, localDead[e.to])
		if err != nil {
			t.Fatalf("Receive at %d: %v", e.to, err)
		}
		if !first {
			if fwd != nil {
				t.Fatalf("duplicate at %d returned forward list %v", e.to, fwd)
			}
			continue
		}
		res.firsts[e.to]++
		res.hop[e.to] = int(e.hop)
		res.maxHop = max(res.maxHop, int(e.hop))
		if p, ok := r.failing[e.to]; ok {
			if p < 0 || p > len(fwd) {
				p = rng.IntN(len(fwd) + 1)
			}
			fwd = fwd[:p]
			res.crashed[e.to] = true
		}
		for _, x := range fwd {
			queue = append(queue, envelope{x, e.hop + 1})
		}
		res.sent += len(fwd)
	}
	return res
}

func newNodes(n int, o Overlay) []*Broadcaster {
	nodes := make([]*Broadcaster, n)
	for i := range nodes {
		nodes[i] = NewBroadcaster(ranks.Rank(i), n, o)
	}
	return nodes
}

// checkDelivery asserts that every alive participant delivered exactly once,
// the source never re-delivered its own broadcast, and nobody delivered twice.
func checkDelivery(t testing.TB, r simRun, res simResult) {
	t.Helper()
	for x := 0; x < r.n; x++ {
		_, failing := r.failing[ranks.Rank(x)]
		want := 1
		switch {
		case ranks.Rank(x) == r.source || r.D.Has(ranks.Rank(x)):
			want = 0
		case failing:
			if res.firsts[x] > 1 {
				t.Fatalf("%s n=%d D=%v s=%d F=%v: failing rank %d delivered %d times", r.o.Name(), r.n, r.D, r.source, r.failing, x, res.firsts[x])
			}
			continue
		}
		if res.firsts[x] != want {
			t.Fatalf("%s n=%d D=%v s=%d F=%v sync=%v: rank %d delivered %d times, want %d",
				r.o.Name(), r.n, r.D, r.source, r.failing, r.sync, x, res.firsts[x], want)
		}
	}
}

// overlays are the overlays under test.
var overlays = []Overlay{HBA{}, BMG{}}

// floorLog2 is k = ⌊log2 m⌋ for m >= 1.
func floorLog2(m int) int { return bits.Len(uint(m)) - 1 }

// ceilLog2 is ⌈log2 m⌉ for m >= 1.
func ceilLog2(m int) int { return bits.Len(uint(m - 1)) }

// subsets calls f with every subset of xs of size <= maxSize.
func subsets(xs []ranks.Rank, maxSize int, f func([]ranks.Rank)) {
	var cur []ranks.Rank
	var rec func(i int)
	rec = func(i int) {
		f(cur)
		if len(cur) == maxSize {
			return
		}
		for j := i; j < len(xs); j++ {
			cur = append(cur, xs[j])
			rec(j + 1)
			cur = cur[:len(cur)-1]
		}
	}
	rec(0)
}

func allRanks(n int) []ranks.Rank {
	rs := make([]ranks.Rank, n)
	for i := range rs {
		rs[i] = ranks.Rank(i)
	}
	return rs
}

func participants(n int, D *ranks.Set) []ranks.Rank {
	var A []ranks.Rank
	for x := 0; x < n; x++ {
		if !D.Has(ranks.Rank(x)) {
			A = append(A, ranks.Rank(x))
		}
	}
	return A
}

// TestFailureFreeRounds runs failure-free synchronous rounds and checks
// delivery to every participant and the hop bounds: HBA ≤ k+1 (in fact
// ≤ k, popcount of a cube coordinate) and BMG ≤ ⌈log2 m⌉.
func TestFailureFreeRounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var ns []int
	for n := 1; n <= 70; n++ {
		ns = append(ns, n)
	}
	ns = append(ns, 127, 128, 129, 255, 256, 257, 1000, 1023, 1024, 1025, 4096)
	for _, o := range overlays {
		for _, n := range ns {
			for trial := 0; trial < 3; trial++ {
				var D ranks.Set
				if trial > 0 {
					for i := rng.IntN(min(n, 11)); i > 0; i-- {
						D.Add(ranks.Rank(rng.IntN(n)))
					}
				}
				A := participants(n, &D)
				if len(A) == 0 {
					continue
				}
				m, k := len(A), floorLog2(len(A))
				r := simRun{n: n, o: o, source: A[rng.IntN(m)], D: D, sync: true}
				res := simulate(t, rng, r)
				checkDelivery(t, r, res)
				bound := ceilLog2(m)
				if o.Name() == "hba" {
					if res.maxHop > k+1 {
						t.Fatalf("hba n=%d m=%d: %d rounds > k+1 = %d", n, m, res.maxHop, k+1)
					}
					bound = k // tighter: a coordinate has at most k one bits
				}
				if res.maxHop > bound {
					t.Fatalf("%s n=%d m=%d: %d rounds > %d", o.Name(), n, m, res.maxHop, bound)
				}
			}
		}
	}
}

// TestFaultToleranceExhaustive tries, for every n in 2..10, every D of up to
// 3 dead ranks, every source and every set of up to k−1 failing participants
// other than the source, failing nodes that send nothing and failing nodes
// that send a random prefix of their list, in a random delivery order.
func TestFaultToleranceExhaustive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	runs := 0
	for _, o := range overlays {
		for n := 2; n <= 10; n++ {
			// The same Broadcasters carry every broadcast of this n: each
			// run is a new broadcast ID, which also exercises the
			// duplicate memory across many broadcasts with gaps.
			nodes := newNodes(n, o)
			subsets(allRanks(n), 3, func(dead []ranks.Rank) {
				D := ranks.Of(dead...)
				A := participants(n, &D)
				if len(A) == 0 {
					return
				}
				k := floorLog2(len(A))
				for _, s := range A {
					var others []ranks.Rank
					for _, x := range A {
						if x != s {
							others = append(others, x)
						}
					}
					subsets(others, max(k-1, 0), func(F []ranks.Rank) {
						for _, prefix := range []int{0, -1} {
							failing := make(map[ranks.Rank]int, len(F))
							for _, f := range F {
								failing[f] = prefix
							}
							r := simRun{n: n, o: o, source: s, D: D, failing: failing, knowFailing: prefix < 0, nodes: nodes}
							checkDelivery(t, r, simulate(t, rng, r))
							runs++
							if len(F) == 0 {
								break
							}
						}
					})
				}
			})
		}
	}
	t.Logf("%d broadcasts simulated", runs)
}

// TestFaultToleranceRandom draws n up to 4096 (log-uniform), up to 10 dead,
// a random source and up to k−1 failing participants with random prefixes,
// delivered in a random order.
func TestFaultToleranceRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	trials, big := 300, 3 // big: trials at n = 4096
	if testing.Short() || raceEnabled {
		trials, big = 60, 1
	}
	for _, o := range overlays {
		for trial := 0; trial < trials; trial++ {
			n := int(math.Exp2(1 + 11*rng.Float64())) // log-uniform in [2, 4096)
			if trial < big {
				n = 4096
			}
			var D ranks.Set
			for i := rng.IntN(11); i > 0; i-- {
				D.Add(ranks.Rank(rng.IntN(n)))
			}
			A := participants(n, &D)
			if len(A) < 2 {
				continue
			}
			s := A[rng.IntN(len(A))]
			k := floorLog2(len(A))
			failing := map[ranks.Rank]int{}
			for f := rng.IntN(k); len(failing) < f; {
				if x := A[rng.IntN(len(A))]; x != s {
					failing[x] = -1
				}
			}
			r := simRun{n: n, o: o, source: s, D: D, failing: failing, knowFailing: trial%2 == 0}
			checkDelivery(t, r, simulate(t, rng, r))
		}
	}
}
