package hb_test

import (
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

// life hands r, at now, the life words of its open round (opened at 110):
// the ranks in up ran at now, the others last before the round, at 105.
func life(r *hb.Ring, now int64, up ...ranks.Rank) {
	rs := r.WantLife(now)
	words := make([]uint64, len(rs))
	for i, j := range rs {
		words[i] = 105
		if slices.Contains(up, j) {
			words[i] = uint64(now)
		}
	}
	r.Life(now, rs, words)
}

// resolveRound checks r from 120 on until its round reports or 600.
func resolveRound(r *hb.Ring) hb.Output {
	var out hb.Output
	for now := int64(120); out.Detected == nil && now < 600; now += 10 {
		out = check(r, now, 0)
	}
	return out
}

// Candidates whose event loops are late (no answer) while their heartbeat
// threads run (their life words show periods after the round began) are
// not reported: the first of them
// is the next emitter, and only the silent rank before it is reported.
func TestRingLifeWordKeepsSlowCandidates(t *testing.T) {
	r := stormRing(t) // candidates 13 … 10, canaries 9 and 0, tail 1
	life(r, 111)
	r.Heard(111, 9)
	r.Heard(112, 1)
	life(r, 115, 12, 11) // 13 and 10 frozen
	out := resolveRound(r)
	if out.Detected == nil || !slices.Equal(append([]ranks.Rank{out.Detected.Dead}, out.Detected.More...), []ranks.Rank{13, 14}) ||
		out.Detected.Frozen != 1 {
		t.Fatalf("resolution %+v", out.Detected)
	}
	if r.Emitter() != 12 || r.Stats().LivesSeen != 2 {
		t.Fatalf("emitter %d, lives seen %d; want 12 and 2", r.Emitter(), r.Stats().LivesSeen)
	}
}

// The same round with words older than the round reports the whole silent
// window, as without life words: a stale or unreadable (0) word is no
// evidence.
func TestRingLifeWordFrozenIsNoEvidence(t *testing.T) {
	r := stormRing(t)
	life(r, 111)
	r.Heard(111, 9)
	r.Heard(112, 1)
	life(r, 115)
	r.Life(116, []ranks.Rank{12, 11}, []uint64{0, 0})
	out := resolveRound(r)
	if out.Detected == nil || !slices.Equal(append([]ranks.Rank{out.Detected.Dead}, out.Detected.More...), []ranks.Rank{13, 12, 11, 10, 14}) {
		t.Fatalf("resolution %+v", out.Detected)
	}
}

// A round whose first candidate, the emitter, shows life resolves at its
// deadline without waiting for the controls, and reports no one.
func TestRingLifeWordEmitterRuns(t *testing.T) {
	r := stormRing(t)
	life(r, 111)
	life(r, 115, 13)
	if out := check(r, 209, 0); out.Detected != nil || !r.Probing() {
		t.Fatalf("before the deadline: %+v, probing %v", out, r.Probing())
	}
	out := check(r, 210, 0)
	if out.Detected != nil || r.Probing() || r.Emitter() != 13 {
		t.Fatalf("at the deadline: %+v, probing %v, emitter %d", out, r.Probing(), r.Emitter())
	}
}

// WantLife asks for the probed ranks while a round is open; with none, for
// the ranks a round would probe, once per view of the ring; and always for
// the emitter.
func TestRingWantLife(t *testing.T) {
	r, err := hb.NewRing(hb.RingConfig{Self: 15, N: 16, Delta: 100, Probe: 4})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.WantLife(0); got != nil {
		t.Fatalf("before Start: %v", got)
	}
	r.Start(0, 100)
	check(r, 10, 1)
	check(r, 200, 2)
	want := []ranks.Rank{10, 0, 14, 13, 12, 11, 1} // canaries, candidates, tail
	if got := r.WantLife(10); !slices.Equal(got, want) {
		t.Fatalf("warm-up %v, want %v", got, want)
	}
	emitter := []ranks.Rank{14}
	if got := r.WantLife(11); !slices.Equal(got, emitter) {
		t.Fatalf("the same view again: %v, want the emitter alone", got)
	}
	words := []uint64{5, 5, 5, 0, 5, 5, 5} // 13 not read yet
	r.Life(12, want, words)
	if got := r.WantLife(111); !slices.Equal(got, emitter) {
		t.Fatalf("a word not read, before δ: %v", got)
	}
	if got := r.WantLife(112); !slices.Equal(got, want) {
		t.Fatalf("a word not read, δ later: %v, want %v", got, want)
	}
	r.Life(112, want, []uint64{105, 105, 105, 105, 105, 105, 105})
	if got := r.WantLife(300); !slices.Equal(got, emitter) {
		t.Fatalf("every word read: %v", got)
	}
	if a := testing.AllocsPerRun(100, func() { r.WantLife(300) }); a != 0 {
		t.Fatalf("WantLife allocates %v times a call in a quiet ring (every turn of a driver's loop), want 0", a)
	}
	out := check(r, 310, 1) // 14 suspected: a round
	if got := r.WantLife(310); !slices.Equal(got, out.Probe) {
		t.Fatalf("in a round %v, want its probes %v", got, out.Probe)
	}
}

// A new emitter whose heartbeats have not started (its event loop has not
// handled NEWOBSERVER yet) but whose life word shows its thread runs is
// not suspected: NEWOBSERVER goes again, with δ more from its last
// period; once the word shows no period for δ, T3 reports it.
func TestRingLifeWordWithholdsT3(t *testing.T) {
	r, err := hb.NewRing(hb.RingConfig{Self: 15, N: 16, Delta: 100}) // Algorithm 1
	if err != nil {
		t.Fatal(err)
	}
	r.Start(0, 100)
	check(r, 10, 1)
	if out := check(r, 110, 1); out.Detected == nil || out.Detected.Dead != 14 || r.Emitter() != 13 {
		t.Fatalf("T3 on 14: %+v", out)
	}
	if got := r.WantLife(120); !slices.Equal(got, []ranks.Rank{13}) {
		t.Fatalf("want life of %v, want the new emitter 13", got)
	}
	r.Life(120, []ranks.Rank{13}, []uint64{118})
	r.Life(300, []ranks.Rank{13}, []uint64{295})
	out := check(r, 310, 0)
	if out.Detected != nil || out.NewObserverTo != 13 || !out.SendNewObserver {
		t.Fatalf("at 2δ with a recent life word: %+v", out)
	}
	r.Life(390, []ranks.Rank{13}, []uint64{295})
	if out := check(r, 410, 0); out.Detected == nil || out.Detected.Dead != 13 {
		t.Fatalf("δ after the word stood still: %+v", out)
	}
}

// So while an early round probes the emitter's predecessors: the emitter
// is asked for too, and its recent word withholds T3.
func TestRingLifeWordWithholdsT3DuringEarlyRound(t *testing.T) {
	r, err := hb.NewRing(hb.RingConfig{Self: 15, N: 16, Delta: 100, Probe: 4, ProbeAfter: 40})
	if err != nil {
		t.Fatal(err)
	}
	r.Start(0, 100) // emitter 14, no heartbeat yet
	if out := check(r, 45, 0); out.Probe == nil {
		t.Fatalf("no early round at 45: %+v", out)
	}
	rs := r.WantLife(45)
	if !slices.Contains(rs, 14) || !slices.Contains(rs, 13) {
		t.Fatalf("want life of %v, want the emitter 14 and the round's 13", rs)
	}
	words := make([]uint64, len(rs))
	for i := range words {
		words[i] = 40
	}
	r.Life(45, rs, words)
	words[slices.Index(rs, 14)] = 95
	r.Life(95, rs, words)
	if out := check(r, 100, 0); out.Detected != nil || out.NewObserverTo != 14 {
		t.Fatalf("T3 with the emitter's word recent: %+v", out)
	}
}

// An emitter whose heartbeats came and then stopped reaching this rank
// (sent through its starved Go runtime, to an observer it has not mapped)
// while its life word shows its thread runs is not suspected; once the
// word shows no period for δ, T3 reports it, saying the word was read.
func TestRingLifeWordWithholdsT3AfterHeartbeats(t *testing.T) {
	r, err := hb.NewRing(hb.RingConfig{Self: 15, N: 16, Delta: 100}) // Algorithm 1
	if err != nil {
		t.Fatal(err)
	}
	r.Start(0, 100)
	check(r, 10, 1)
	check(r, 50, 2) // heartbeats from 14, then silence
	if got := r.WantLife(60); !slices.Equal(got, []ranks.Rank{14}) {
		t.Fatalf("want life of %v, want the emitter 14", got)
	}
	r.Life(60, []ranks.Rank{14}, []uint64{55})
	r.Life(140, []ranks.Rank{14}, []uint64{138})
	if out := check(r, 160, 2); out.Detected != nil || out.NewObserverTo != 14 || !out.SendNewObserver {
		t.Fatalf("silent for more than δ with a recent life word: %+v", out)
	}
	r.Life(200, []ranks.Rank{14}, []uint64{138})
	if out := check(r, 230, 2); out.Detected != nil {
		t.Fatalf("the word stood still for less than δ: %+v", out)
	}
	out := check(r, 245, 2)
	if out.Detected == nil || out.Detected.Dead != 14 || out.Detected.LifeRead != 1 || out.Detected.Frozen != 1 {
		t.Fatalf("δ after the word's last growth: %+v", out.Detected)
	}
}

// One read is enough: the word holds the time of the thread's last period,
// so a word first read just before T3 withholds it if that period is
// within δ. A word further ahead of this rank's clock than δ (another
// clock) shows nothing.
func TestRingLifeWordOneRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		word uint64
		t3   bool
	}{{"recent", 250, false}, {"older than δ", 200, true}, {"ahead of the clock", 500, true}, {"unread", 0, true}} {
		r, err := hb.NewRing(hb.RingConfig{Self: 15, N: 16, Delta: 100})
		if err != nil {
			t.Fatal(err)
		}
		r.Start(0, 100)
		check(r, 10, 1)
		check(r, 110, 1) // T3 on 14: the emitter is 13, SUSP-TIMEOUT 2δ
		r.Life(309, []ranks.Rank{13}, []uint64{tc.word})
		out := check(r, 310, 0)
		if got := out.Detected != nil; got != tc.t3 {
			t.Errorf("%s: word %d read once at 309: T3 at 310 %v, want %v (%+v)", tc.name, tc.word, got, tc.t3, out)
		}
	}
}

// A heartbeat thread the kernel holds back (its process runnable, as the
// driver finds it) is not suspected while it ran within 2δ; once it runs
// again its heartbeats go on and nobody is reported. Held past 2δ, or
// with its process not found runnable (stopped, gone), T3 reports it as
// before.
func TestRingHeldThreadIsNotSuspected(t *testing.T) {
	start := func() *hb.Ring {
		r, err := hb.NewRing(hb.RingConfig{Self: 15, N: 16, Delta: 100}) // Algorithm 1
		if err != nil {
			t.Fatal(err)
		}
		r.Start(0, 100)
		check(r, 10, 1)
		check(r, 50, 2) // heartbeats from 14, then the thread is held
		r.Life(50, []ranks.Rank{14}, []uint64{50})
		return r
	}
	feed := func(r *hb.Ring, now int64, runnable bool) {
		r.Life(now, []ranks.Rank{14}, []uint64{50}) // the word stands still
		if j, ok := r.WantRunnable(now); !ok || j != 14 {
			t.Fatalf("at %d: WantRunnable %d %v, want the emitter 14", now, j, ok)
		}
		if runnable {
			r.Runnable(now, 14)
		}
	}

	r := start()
	if _, ok := r.WantRunnable(60); ok {
		t.Fatal("WantRunnable while the word is fresher than δ/2")
	}
	feed(r, 150, true)
	if out := check(r, 150, 2); out.Detected != nil {
		t.Fatalf("held thread, runnable process, ran 100 ago: %+v", out.Detected)
	}
	feed(r, 180, true)
	if out := check(r, 180, 3); out.Detected != nil { // it runs again
		t.Fatalf("after the hold: %+v", out.Detected)
	}
	if out := check(r, 270, 4); out.Detected != nil {
		t.Fatalf("heartbeats again: %+v", out.Detected)
	}
	if s := r.Stats(); s.Held == 0 {
		t.Fatal("Stats().Held = 0 after a held suspicion")
	}

	r = start()
	feed(r, 150, false) // stopped or gone: as before
	if out := check(r, 150, 2); out.Detected == nil || out.Detected.Dead != 14 {
		t.Fatalf("process not runnable: %+v, want T3", out.Detected)
	}

	r = start()
	for now := int64(150); now < 250; now += 25 {
		feed(r, now, true)
		if out := check(r, now, 2); out.Detected != nil {
			t.Fatalf("at %d, ran %d ago: %+v", now, now-50, out.Detected)
		}
	}
	feed(r, 250, true)
	if out := check(r, 250, 2); out.Detected == nil || out.Detected.Dead != 14 || out.Detected.Frozen != 1 {
		t.Fatalf("runnable but silent for 2δ: %+v, want T3", out.Detected)
	}
}
