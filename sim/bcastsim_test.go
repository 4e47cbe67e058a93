package sim

import (
	"math/bits"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

var allOverlays = []bcast.Overlay{bcast.HBA{}, bcast.BMG{}, Binomial{}, BIG{}}

func bsim(t *testing.T, cfg BroadcastConfig, seed uint64) BroadcastResult {
	t.Helper()
	r, err := SimulateBroadcast(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func log2ceil(m int) int { return bits.Len(uint(m - 1)) }

// TestClosedFormsTelephone: in the telephone model (one-port, every
// transfer takes exactly t) the binomial tree and BMG, which sends its
// binomial spanning tree first, deliver in ⌈log2 m⌉ rounds, and HBA within
// the 4 t log2 m that seed 000 §3.1.2 gives for its two hypercube calls.
func TestClosedFormsTelephone(t *testing.T) {
	const tt = 1000
	for m := 2; m <= 300; m++ {
		net := OnePort{T: tt, Fixed: true}
		for _, o := range []bcast.Overlay{Binomial{}, bcast.BMG{}} {
			r := bsim(t, BroadcastConfig{N: m, Overlay: o, Net: net, Source: ranks.Rank(m / 3)}, 1)
			if want := int64(log2ceil(m)) * tt; r.Latency != want || !r.Consistent() {
				t.Fatalf("%s m=%d: latency %d, want ⌈log2 m⌉t = %d (reached %d/%d)", o.Name(), m, r.Latency, want, r.Reached, r.Participants)
			}
		}
		r := bsim(t, BroadcastConfig{N: m, Overlay: bcast.HBA{}, Net: net}, 1)
		k := bits.Len(uint(m)) - 1
		if r.Latency > int64(4*k)*tt || !r.Consistent() {
			t.Fatalf("hba m=%d: latency %d > 4 t log2 m = %d", m, r.Latency, 4*k*tt)
		}
		if b := bsim(t, BroadcastConfig{N: m, Overlay: Binomial{}, Net: net}, 1); b.Msgs != uint64(m-1) {
			t.Fatalf("binomial m=%d: %d messages", m, b.Msgs)
		}
	}
}

// TestClosedFormsHops: with o = g = 0 every message takes exactly L and a
// node sends all its messages at once, so the latency is L times the
// overlay's depth: ⌈log2 m / 2⌉ for BMG and for HBA when m = 2^k (the two
// hypercubes then cover every label and short-cut each other), k for HBA
// when m = 2^(k+1) − 1 (the two cubes share only the source), ⌈log2 m⌉
// for the binomial tree.
func TestClosedFormsHops(t *testing.T) {
	const L = 1000
	net := LogP{L: L}
	for k := 1; k <= 12; k++ {
		m := 1 << k
		half := int64((k+1)/2) * L
		for _, c := range []struct {
			o    bcast.Overlay
			m    int
			want int64
		}{
			{bcast.BMG{}, m, half},
			{bcast.HBA{}, m, half},
			{bcast.HBA{}, 2*m - 1, int64(k) * L},
			{Binomial{}, m, int64(k) * L},
		} {
			r := bsim(t, BroadcastConfig{N: c.m, Overlay: c.o, Net: net, Source: 1}, 1)
			if r.Latency != c.want || !r.Consistent() {
				t.Fatalf("%s m=%d: latency %d, want %d", c.o.Name(), c.m, r.Latency, c.want)
			}
		}
	}
}

// TestClosedFormsLogP: in LogP with g ≤ o, a binomial tree over m = 2^d
// nodes delivers in d(2o+L), and seed 002's BIG model completes in
// (2o+L) log2 P + o log2 P: the tree's latency plus the last node's log2 P
// sends.
func TestClosedFormsLogP(t *testing.T) {
	net := LogP{L: 2000, O: 1000, G: 1000}
	for d := 1; d <= 12; d++ {
		m := 1 << d
		hop := int64(2*1000 + 2000)
		b := bsim(t, BroadcastConfig{N: m, Overlay: Binomial{}, Net: net}, 1)
		if b.Latency != int64(d)*hop || b.Completion != b.Latency {
			t.Fatalf("binomial m=%d: latency %d completion %d, want %d", m, b.Latency, b.Completion, int64(d)*hop)
		}
		g := bsim(t, BroadcastConfig{N: m, Overlay: BIG{}, Net: net, Source: ranks.Rank(m - 1)}, 1)
		if g.Latency != int64(d)*hop || g.Completion != int64(d)*(hop+1000) || g.Msgs != uint64(m*d) {
			t.Fatalf("BIG m=%d: latency %d completion %d msgs %d, want %d, %d, %d", m, g.Latency, g.Completion, g.Msgs,
				int64(d)*hop, int64(d)*(hop+1000), m*d)
		}
	}
}

// TestOnePortWithinB: HBA and BMG with random transfer times in (0, t]
// finish within B(n) = 8 t log2 n of seed 000 §3.1.2.
func TestOnePortWithinB(t *testing.T) {
	const tt = 1000
	for _, m := range []int{7, 64, 100, 1000, 4096} {
		for _, o := range []bcast.Overlay{bcast.HBA{}, bcast.BMG{}} {
			for seed := uint64(1); seed <= 3; seed++ {
				for _, single := range []bool{false, true} {
					r := bsim(t, BroadcastConfig{N: m, Overlay: o, Net: OnePort{T: tt, SinglePort: single}, Source: 3}, seed)
					if b := hb.BroadcastTime(m, tt); r.Latency > b || !r.Consistent() {
						t.Fatalf("%s m=%d single=%v: latency %d > B(n) = %d", o.Name(), m, single, r.Latency, b)
					}
				}
			}
		}
	}
}

// TestFaultTolerance: HBA and BMG reach every alive participant despite
// k−1 participants crashing at random times during the broadcast, and
// dead ranks the source does not know of; the binomial tree does not.
func TestFaultTolerance(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, m := range []int{16, 100, 1000} {
		k := bits.Len(uint(m)) - 1
		for trial := range 20 {
			perm := rng.Perm(m - 1)
			var fail []Failure
			for _, x := range perm[:k-1] {
				fail = append(fail, Failure{At: rng.Int64N(20000), Rank: ranks.Rank(x + 1)})
			}
			for _, o := range []bcast.Overlay{bcast.HBA{}, bcast.BMG{}} {
				for _, net := range []Network{OnePort{T: 1000}, LogP{L: 2000, O: 1000, G: 1000, RecvContention: trial%2 == 0}} {
					r := bsim(t, BroadcastConfig{N: m, Overlay: o, Net: net, Failing: fail, LocalDead: trial%3 == 0}, uint64(trial))
					if !r.Consistent() {
						t.Fatalf("%s %v m=%d failing %v: reached %d of %d", o.Name(), net, m, fail, r.Reached, r.Participants)
					}
				}
			}
		}
	}
	r := bsim(t, BroadcastConfig{N: 64, Overlay: Binomial{}, Net: LogP{L: 2, O: 1}, Dead: []ranks.Rank{1}}, 1)
	if r.Consistent() || r.Reached != 31 {
		t.Fatalf("binomial tree without label 1: reached %d of %d, want 31", r.Reached, r.Participants)
	}
}

// TestExhaustiveSame: handing duplicates to the Broadcaster changes nothing.
func TestExhaustiveSame(t *testing.T) {
	for _, o := range allOverlays {
		cfg := BroadcastConfig{N: 300, Overlay: o, Net: OnePort{T: 1000}, Source: 17, Dead: []ranks.Rank{5, 40},
			Failing: []Failure{{At: 2500, Rank: 18}, {At: 900, Rank: 100}}, Known: ranks.Of(7, 9)}
		a := bsim(t, cfg, 4)
		cfg.Exhaustive = true
		b := bsim(t, cfg, 4)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: exhaustive differs", o.Name())
		}
	}
}

// TestFloodKernel checks the fast LogP kernel of the broadcast study
// against broadcasts driven through every rank's bcast.Broadcaster, with
// dead ranks and crashes during the broadcast: the same delivery time at
// every rank, the same messages.
func TestFloodKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	net := LogP{L: 2000, O: 1000, G: 1000}
	u, err := net.Units(1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []int{2, 5, 64, 100, 1000, 4096} {
		for _, o := range allOverlays {
			f := newFlooder(NewFloodTable(o, m), u)
			for trial := range 6 {
				death := make([]int32, m)
				for i := range death {
					death[i] = never
				}
				var dead []ranks.Rank
				var fail []Failure
				for range trial * 2 {
					x := 1 + rng.IntN(m-1)
					if death[x] != never {
						continue
					}
					if rng.IntN(2) == 0 {
						death[x] = -1
						dead = append(dead, ranks.Rank(x))
					} else {
						at := 1 + rng.Int32N(40)
						death[x] = at
						fail = append(fail, Failure{At: int64(at) * 1000, Rank: ranks.Rank(x)})
					}
				}
				got := f.run(death)
				want := bsim(t, BroadcastConfig{N: m, Overlay: o, Net: net, Dead: dead, Failing: fail}, 1)
				for x := range m {
					w := want.Recv[x]
					g := int64(f.arr[x])
					if f.arr[x] == never {
						g = -1
					} else {
						g *= 1000
					}
					if death[x] < 0 {
						w = -1
					}
					if death[x] != never && death[x] >= 0 && g >= int64(death[x])*1000 {
						g = -1
					}
					if w != g {
						t.Fatalf("%s m=%d dead %v failing %v: rank %d receives at %d, engine says %d", o.Name(), m, dead, fail, x, g, w)
					}
				}
				if uint64(got.msgs) != want.Msgs || int64(got.latency)*1000 != want.Latency ||
					int64(got.completion)*1000 != want.Completion || int(got.reached) != want.Reached || int(got.alive) != want.Participants {
					t.Fatalf("%s m=%d: kernel %+v, engine msgs %d latency %d completion %d reached %d/%d", o.Name(), m, got,
						want.Msgs, want.Latency, want.Completion, want.Reached, want.Participants)
				}
			}
		}
	}
}
