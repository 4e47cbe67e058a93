package detector_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// TestGoneView: the Core's record of the ranks gone, read through views
// taken as the crashes come (each from the previous one): every view
// holds the events of Ready in delivery order, by rank in increasing
// order and by Known; a view taken earlier does not change; the counters
// of Stats agree; a view with nothing new is the previous one.
func TestGoneView(t *testing.T) {
	const n = 12
	c := newCluster(t, n, nil)
	c.run(3 * delta)
	var views []*detector.GoneView
	var prev *detector.GoneView
	for _, r := range []ranks.Rank{7, 2, 9, 3} {
		c.crash(r)
		c.run(4 * delta)
		v := c.cores[0].Gone(prev)
		if v == prev {
			t.Fatalf("no new view after rank %d crashed", r)
		}
		if c.cores[0].Gone(v) != v {
			t.Error("a view with nothing new is not the previous one")
		}
		views, prev = append(views, v), v
	}
	check := func(v *detector.GoneView, evs []detector.Event) {
		t.Helper()
		if v.Len() != len(evs) {
			t.Fatalf("view of %d ranks, want %d", v.Len(), len(evs))
		}
		var sorted []ranks.Rank
		for i, ev := range evs {
			if v.Event(i) != ev {
				t.Errorf("event %d: %+v, want %+v", i, v.Event(i), ev)
			}
			if got, ok := v.Known(ev.Rank); !ok || got != ev {
				t.Errorf("Known(%d) = %+v, %v", ev.Rank, got, ok)
			}
			sorted = append(sorted, ev.Rank)
		}
		slices.Sort(sorted)
		for i, r := range sorted {
			if v.Rank(i) != r {
				t.Errorf("Rank(%d) = %d, want %d", i, v.Rank(i), r)
			}
		}
		if _, ok := v.Known(0); ok {
			t.Error("a live rank is known gone")
		}
	}
	evs := c.events[0]
	if len(evs) != 4 {
		t.Fatalf("rank 0 learned %+v, want 4 crashes", evs)
	}
	for i, v := range views {
		check(v, evs[:i+1])
	}
	for _, ev := range evs {
		if ev.Delivered.Mono == 0 || ev.Delivered.Mono > c.now {
			t.Errorf("rank %d delivered at %d (now %d)", ev.Rank, ev.Delivered.Mono, c.now)
		}
	}
	if st := c.cores[0].Stats(); st.DeathsLearned != 4 || st.Departures != 0 {
		t.Errorf("stats %+v, want 4 deaths learned", st)
	}
	var reported uint64
	for _, core := range c.cores { // the crashed ones too: rank 3 reported 2
		reported += core.Stats().Reported
	}
	if reported != 4 {
		t.Errorf("%d crashes reported by their observers, want 4", reported)
	}
	var empty *detector.GoneView
	if empty.Len() != 0 {
		t.Error("a nil view is not empty")
	}
	if _, ok := empty.Known(1); ok {
		t.Error("a nil view knows a rank")
	}
}

// TestGoneViewManyDeliveries: views taken after each of many deliveries
// of random sizes (the runs of a view merge as they come) all hold their
// prefix of the events, by rank and by Known, however many views came
// after them.
func TestGoneViewManyDeliveries(t *testing.T) {
	const n = 1024
	core, err := detector.NewCore(detector.Config{Self: 0, Size: n, SuspectTimeout: delta, Zombies: true})
	if err != nil {
		t.Fatal(err)
	}
	core.Start(0, 2*delta)
	rng := rand.New(rand.NewPCG(29, 3))
	perm := rng.Perm(n - 1)
	var views []*detector.GoneView
	var prev *detector.GoneView
	now := detector.Time{Mono: delta, Wall: delta}
	for i, seq := 0, uint64(1); i < 400; seq++ {
		k := 1 + rng.IntN(8)
		if rng.IntN(10) == 0 {
			k = 1 + rng.IntN(64)
		}
		var dead []ranks.Rank
		for _, p := range perm[i:min(i+k, 400)] {
			dead = append(dead, ranks.Rank(p+1))
		}
		i += len(dead)
		src := ranks.Rank(perm[400+rng.IntN(n-1-400)] + 1)
		core.Step(now, src, &wire.Bcast{Message: bcast.Message{ID: bcast.ID{Source: src, Seq: seq}, Kind: bcast.Failed,
			Dead: dead, D: ranks.Of(dead...), Detector: src}})
		core.Ready()
		prev = core.Gone(prev)
		views = append(views, prev)
		now.Mono++
	}
	all := core.Gone(nil)
	if all.Len() != 400 {
		t.Fatalf("%d ranks gone, want 400", all.Len())
	}
	for i := range all.Len() { // Known, past the share of the job from which the Core indexes densely
		if ev, ok := core.Known(all.Event(i).Rank); !ok || ev != all.Event(i) {
			t.Fatalf("Known(%d) = %+v, %v; want %+v", all.Event(i).Rank, ev, ok, all.Event(i))
		}
	}
	if _, ok := core.Known(ranks.Rank(perm[500] + 1)); ok {
		t.Fatalf("a live rank is known gone")
	}
	for _, v := range views {
		var want []ranks.Rank
		for i := range v.Len() {
			ev := v.Event(i)
			if ev != all.Event(i) {
				t.Fatalf("event %d of a view of %d: %+v, want %+v", i, v.Len(), ev, all.Event(i))
			}
			if got, ok := v.Known(ev.Rank); !ok || got != ev {
				t.Fatalf("view of %d: Known(%d) = %+v, %v", v.Len(), ev.Rank, got, ok)
			}
			want = append(want, ev.Rank)
		}
		slices.Sort(want)
		for i, r := range want {
			if v.Rank(i) != r {
				t.Fatalf("view of %d: Rank(%d) = %d, want %d", v.Len(), i, v.Rank(i), r)
			}
		}
		if v.Len() < all.Len() {
			if _, ok := v.Known(all.Event(v.Len()).Rank); ok {
				t.Fatalf("view of %d knows rank %d, delivered after it", v.Len(), all.Event(v.Len()).Rank)
			}
		}
	}
}
