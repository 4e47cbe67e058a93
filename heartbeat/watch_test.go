package heartbeat_test

import (
	"slices"
	"sync/atomic"
	"testing"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// watchRig is rank 1 of a 4-rank ring observing rank 0 through a Watch, as
// the node runs it: the heartbeat thread checks every 10, the loop
// observes whenever the test says.
type watchRig struct {
	t     *testing.T
	slots *transport.Slots
	w     *heartbeat.Watch
	r     *hb.Ring
}

const wδ = 100

func newWatchRig(t *testing.T, guard int64) *watchRig {
	r, err := hb.NewRing(hb.RingConfig{Self: 1, N: 4, Delta: wδ})
	if err != nil {
		t.Fatal(err)
	}
	g := &watchRig{t: t, slots: transport.NewSlots(4), r: r}
	g.w = heartbeat.NewWatch(g.slots, guard)
	r.Start(0, wδ)
	g.w.Set(r.Emitter(), 0)
	return g
}

// run checks every 10 from `from` to `to` (inclusive), with emitter 0
// heartbeating until beatsUntil, and observes after every check; it
// returns the first detection's time, or -1.
func (g *watchRig) run(from, to, beatsUntil int64) int64 {
	for now := from; now <= to; now += 10 {
		if now <= beatsUntil {
			g.slots.Store(0, uint64(now+1))
		}
		g.w.Check(now)
		if out := g.r.Observe(now, g.w.Record()); out.Detected != nil {
			return now
		}
	}
	return -1
}

// TestWatchObserveDetects: T3 fires at the first check at or after the
// last growth seen plus δ, not before; a live emitter is never suspected.
func TestWatchObserveDetects(t *testing.T) {
	g := newWatchRig(t, 0)
	if at := g.run(0, 1000, 1000); at != -1 {
		t.Fatalf("live emitter suspected at %d", at)
	}
	// The last heartbeat is seen by the check at 1000; δ later is 1100.
	at := g.run(1010, 2000, 0)
	if at != 1100 {
		t.Fatalf("detected at %d, want 1100 (last growth 1000 + δ)", at)
	}
	if !g.r.Dead().Has(0) || g.r.Emitter() != 3 {
		t.Fatalf("after T3: D = %v, emitter %d", g.r.Dead().Members(), g.r.Emitter())
	}
}

// TestWatchObserveLateLoop: the loop may look late, or rarely; what counts
// is what the checks saw. Observing once after a long quiet stretch uses the
// time of the last growth, and a deadline no check has passed yet never
// fires.
func TestWatchObserveLateLoop(t *testing.T) {
	g := newWatchRig(t, 0)
	for now := int64(0); now <= 500; now += 10 {
		g.slots.Store(0, uint64(now+1))
		g.w.Check(now)
	}
	// The loop first looks at 550: growth seen at 500, deadline 600.
	if out := g.r.Observe(550, g.w.Record()); out.Detected != nil || g.r.Deadline() != 600 {
		t.Fatalf("deadline %d, want 600", g.r.Deadline())
	}
	// The loop looks at 700, but the last check ran at 500: hold.
	if out := g.r.Observe(700, g.w.Record()); out.Detected != nil {
		t.Fatal("suspected with no check after the deadline")
	}
	g.w.Check(700)
	if out := g.r.Observe(700, g.w.Record()); out.Detected == nil {
		t.Fatal("not suspected after a check past the deadline")
	}
}

// TestWatchStallGuard: a check that comes more than the guard after the
// previous one (the heartbeat thread itself was stalled) re-arms
// SUSP-TIMEOUT instead of letting it expire.
func TestWatchStallGuard(t *testing.T) {
	g := newWatchRig(t, 50)
	g.run(0, 300, 300)
	// The thread stalls from 300 to 900; the emitter heartbeats
	// meanwhile but, on a transport drained at check time, nothing shows.
	g.w.Check(900)
	if out := g.r.Observe(900, g.w.Record()); out.Detected != nil {
		t.Fatal("suspected at the first check after the checker's own stall")
	}
	if g.r.Deadline() != 900+wδ {
		t.Fatalf("deadline %d, want re-armed to %d", g.r.Deadline(), 900+wδ)
	}
	// Without heartbeats from then on, T3 comes δ after the re-arm.
	if at := g.run(910, 2000, 0); at != 1000 {
		t.Fatalf("detected at %d, want 1000", at)
	}
}

// TestWatchOtherEmitter: a record about another emitter than the ring's
// (the ring moved on since the watch was set) changes nothing.
func TestWatchOtherEmitter(t *testing.T) {
	g := newWatchRig(t, 0)
	g.run(0, 100, 100)
	g.w.Set(2, 110)
	for now := int64(110); now < 1000; now += 10 {
		g.w.Check(now)
		if out := g.r.Observe(now, g.w.Record()); out.Detected != nil {
			t.Fatalf("record about rank 2 made the ring suspect rank 0 at %d", now)
		}
	}
	if d := g.r.Deadline(); d != 100+wδ {
		t.Fatalf("deadline moved to %d by another emitter's record", d)
	}
}

// TestWatchReconnect: after T3 the new emitter has the 2δ grace from the
// detection; its first heartbeat resets SUSP-TIMEOUT to δ.
func TestWatchReconnect(t *testing.T) {
	g := newWatchRig(t, 0)
	g.run(0, 100, 100)
	at := g.run(110, 1000, 0)
	if at != 200 {
		t.Fatalf("detected at %d", at)
	}
	e := g.r.Emitter()
	g.w.Set(e, at)
	if g.r.Deadline() != at+2*wδ {
		t.Fatalf("deadline %d, want %d", g.r.Deadline(), at+2*wδ)
	}
	for now := at + 10; now < at+2*wδ; now += 10 {
		g.w.Check(now)
		if out := g.r.Observe(now, g.w.Record()); out.Detected != nil {
			t.Fatalf("new emitter suspected within its grace at %d", now)
		}
	}
	g.slots.Store(e, 1)
	g.w.Check(at + 2*wδ)
	g.r.Observe(at+2*wδ, g.w.Record())
	if g.r.Deadline() != at+3*wδ {
		t.Fatalf("deadline %d after the new emitter's first heartbeat, want %d", g.r.Deadline(), at+3*wδ)
	}
	if got := g.w.Record(); got.Emitter != e || got.Seq != 1 {
		t.Fatalf("record %+v", got)
	}
}

// TestWatchUnset: a Watch set to nothing records nothing.
func TestWatchUnset(t *testing.T) {
	w := heartbeat.NewWatch(transport.NewSlots(2), 0)
	w.Check(5)
	if r := w.Record(); r.CheckedAt != 0 || r.Seq != 0 {
		t.Fatalf("record %+v", r)
	}
}

// TestWatchConcurrent: the heartbeat thread checks while the loop sets and
// reads, on one clock; every record read is whole (-race checks the rest).
func TestWatchConcurrent(t *testing.T) {
	slots := transport.NewSlots(4)
	w := heartbeat.NewWatch(slots, 0)
	var clock atomic.Int64
	clock.Store(1)
	w.Set(1, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20000 {
			now := clock.Add(1)
			slots.Store(ranks.Rank(now%4), uint64(now))
			w.Check(now)
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		default:
		}
		if i%100 == 0 {
			w.Set(ranks.Rank(i/100%3+1), clock.Load())
		}
		r := w.Record()
		if r.CheckedAt < r.GrewAt || (r.Emitter != 1 && r.Emitter != 2 && r.Emitter != 3 && r.CheckedAt != 0) {
			t.Fatalf("torn record %+v", r)
		}
	}
}

// TestWatchAlarm: the silence alarm never rings while the word grows at
// every check, rings at the first check that finds it silent for the
// alarm's silence, then again every silence while it stays silent, and
// starts over after a growth or a new emitter.
func TestWatchAlarm(t *testing.T) {
	slots := transport.NewSlots(4)
	w := heartbeat.NewWatch(slots, 0)
	var rang []int64
	now := int64(0)
	w.SetAlarm(50, func() { rang = append(rang, now) })
	w.Set(0, 0)
	seq := uint64(0)
	for now = 10; now <= 200; now += 10 { // heartbeats at every check
		seq++
		slots.Store(0, seq)
		w.Check(now)
	}
	if len(rang) != 0 {
		t.Fatalf("alarm while the word grew: %v", rang)
	}
	for now = 210; now <= 400; now += 10 { // silent from 200
		w.Check(now)
	}
	if want := []int64{250, 300, 350, 400}; !slices.Equal(rang, want) {
		t.Fatalf("alarms %v, want %v", rang, want)
	}
	rang = nil
	seq++
	slots.Store(0, seq)
	for now = 410; now <= 470; now += 10 { // grew at 410, silent again
		w.Check(now)
	}
	if want := []int64{460}; !slices.Equal(rang, want) {
		t.Fatalf("after a growth: alarms %v, want %v", rang, want)
	}
	rang = nil
	w.Set(2, 470)
	for now = 480; now <= 520; now += 10 {
		w.Check(now)
	}
	if want := []int64{520}; !slices.Equal(rang, want) {
		t.Fatalf("after a new emitter: alarms %v, want %v", rang, want)
	}
}
