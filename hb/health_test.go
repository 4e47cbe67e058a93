package hb_test

import (
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

// stormRing returns rank 15 of 16 with block mending (window 4), its
// emitter 14 found dead by T3 at 110: the first round probes 13 … 10 and
// the canaries.
func stormRing(t *testing.T) *hb.Ring {
	t.Helper()
	r, out := suspected(t, hb.RingConfig{Self: 15, N: 16, Delta: 100, Probe: 4})
	if out.Detected == nil || out.Detected.Dead != 14 || !probesFirst(out.Probe, []ranks.Rank{13, 12, 11, 10}) {
		t.Fatalf("T3: %+v", out)
	}
	return r
}

// suspected returns a ring of cfg (Delta 100) started at 0 whose emitter
// heartbeated once at 10, and what T3 made of its silence at 110.
func suspected(t *testing.T, cfg hb.RingConfig) (*hb.Ring, hb.Output) {
	t.Helper()
	r, err := hb.NewRing(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.Start(0, 100)
	check(r, 10, 1)
	return r, check(r, 110, 1)
}

// Under a storm every live candidate answers, but later than the probe
// time-out: nobody is reported, and the round waits for the answers.
func TestRingStormAnswersLate(t *testing.T) {
	r := stormRing(t)
	if out := check(r, 210, 0); out.Detected != nil || out.Probe != nil {
		t.Fatalf("with no answer back, not even the tail's: %+v", out)
	}
	for i, c := range []ranks.Rank{11, 13, 12, 10, 9, 8, 7, 6} {
		now := int64(250 + 60*i)
		r.Heard(now, c)
		if out := check(r, now+1, 0); out.Detected != nil {
			t.Fatalf("after %d answered at %d: reported %+v", c, now, out.Detected)
		}
	}
	for now := int64(800); now < 3000; now += 20 {
		if out := check(r, now, uint64(now)); out.Detected != nil { // 13 heartbeats once it had NEWOBSERVER
			t.Fatalf("at %d: reported %+v", now, out.Detected)
		}
	}
	if r.Emitter() != 13 || r.Probing() {
		t.Fatalf("emitter %d, probing %v", r.Emitter(), r.Probing())
	}
	if st := r.Stats(); st.HealthRises == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A round that no answer reaches, not even its tail's (the second rank
// after Self, probed last), waits hb.TailWait time-outs for it, then is
// widened: the same first candidate, the next candidates after it, nobody
// reported.
func TestRingSilentRoundWidened(t *testing.T) {
	r := stormRing(t)
	for now := int64(120); now < 110+hb.TailWait*100; now += 20 {
		if out := check(r, now, 0); out.Detected != nil || out.Probe != nil {
			t.Fatalf("at %d, before the tail's wait ran out: %+v", now, out)
		}
	}
	out := check(r, 110+hb.TailWait*100, 0)
	if out.Detected != nil || !probesFirst(out.Probe, []ranks.Rank{13, 12, 11, 10, 9, 8, 7, 6}) {
		t.Fatalf("widened round: %+v", out)
	}
	if st := r.Stats(); st.RoundsWidened != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A dead block with a prompt control: a canary's answer comes back at
// once, the block is reported at the round's deadline, as before.
func TestRingControlPromptBlockReported(t *testing.T) {
	r := stormRing(t)
	r.Heard(111, 0) // the canary after Self
	r.Heard(112, 11)
	out := check(r, 210, 0)
	if out.Detected == nil || out.Detected.Dead != 13 {
		t.Fatalf("resolution: %+v", out.Detected)
	}
	if r.Emitter() != 11 || r.Dead().Has(11) || !r.Dead().Has(12) {
		t.Fatalf("emitter %d, D %v", r.Emitter(), r.Dead())
	}
}

// Any message from a candidate is its answer, whatever the round it
// answers; one from the emitter withholds its suspicion.
func TestRingHeardIsEvidenceOfLife(t *testing.T) {
	r := stormRing(t)
	r.Heard(111, 0)
	r.Heard(150, 13) // a broadcast forwarded by 13, say
	for now := int64(160); now <= 300; now += 10 {
		if out := check(r, now, 0); out.Detected != nil {
			t.Fatalf("at %d: %+v", now, out.Detected)
		}
	}
	if r.Emitter() != 13 || r.Probing() {
		t.Fatalf("emitter %d, probing %v", r.Emitter(), r.Probing())
	}
	// 13 never heartbeats (it has not had NEWOBSERVER) but talks: not
	// suspected, NEWOBSERVER goes again.
	r.Heard(305, 13)
	out := check(r, 390, 0)
	if out.Detected != nil || !out.SendNewObserver || out.NewObserverTo != 13 {
		t.Fatalf("emitter that talks: %+v", out)
	}
	out = check(r, 406, 0)
	if out.Detected == nil || out.Detected.Dead != 13 {
		t.Fatalf("silent for δ since its last message: %+v", out)
	}
	if r.Stats().Refuted != 1 {
		t.Fatalf("stats %+v", r.Stats())
	}
}

// A prober that comes to its round's deadline late (it was stalled) holds
// the round open: the answers may be waiting unread.
func TestRingStalledProberWaits(t *testing.T) {
	r := stormRing(t)
	r.Heard(111, 0)
	if out := check(r, 300, 0); out.Detected != nil {
		t.Fatalf("resolved by a stalled prober: %+v", out.Detected)
	}
	r.Heard(301, 13)
	if out := check(r, 400, 0); out.Detected != nil {
		t.Fatalf("%+v", out.Detected)
	}
	if r.Health(400) == 0 || r.Health(400+hb.HealthDecay*100*hb.MaxHealth) != 0 {
		t.Fatalf("health %d, then %d", r.Health(400), r.Health(400+hb.HealthDecay*100*hb.MaxHealth))
	}
}

// A round whose probes take long to send: a canary answers at once, the
// last candidate and the tail (the second rank after Self, probed last)
// only after the round's deadline. The
// round waits for the tail, so the live last candidate is not reported;
// the silent ones before it are, at the tail's answer plus a margin.
func TestRingTailCanaryWaitsForTheSend(t *testing.T) {
	r := stormRing(t) // candidates 13 … 10, canaries 9 and 0, tail 1; deadline 210
	r.Heard(111, 0)
	for now := int64(120); now <= 300; now += 20 {
		if out := check(r, now, 0); out.Detected != nil {
			t.Fatalf("at %d, before the tail answered: %+v", now, out.Detected)
		}
	}
	r.Heard(300, 10)
	r.Heard(301, 1)
	var out hb.Output
	for now := int64(302); out.Detected == nil && now < 400; now++ {
		out = check(r, now, 0)
	}
	if out.Detected == nil || !slices.Equal(append([]ranks.Rank{out.Detected.Dead}, out.Detected.More...), []ranks.Rank{13, 12, 11, 14}) {
		t.Fatalf("resolution %+v", out.Detected)
	}
	if out.Detected.At < 301 || r.Emitter() != 10 || r.Dead().Has(10) {
		t.Fatalf("reported at %d, emitter %d, D %v", out.Detected.At, r.Emitter(), r.Dead())
	}
}

// Without host labels, a round whose every candidate is silent while the
// rank beyond them answered at once is given one more time-out: the
// candidates were slow (their event loops starved), not a block that ends
// exactly at the window. The first candidate's late answer then reports
// nobody.
func TestRingSilentWindowWaitsOnce(t *testing.T) {
	r := stormRing(t) // candidates 13 … 10, canaries 9 and 0, tail 1; deadline 210
	r.Heard(111, 9)
	r.Heard(112, 1)
	for now := int64(120); now < 250; now += 10 {
		if out := check(r, now, 0); out.Detected != nil {
			t.Fatalf("at %d: reported %+v", now, out.Detected)
		}
	}
	r.Heard(250, 13)
	for now := int64(250); now < 400; now += 10 {
		if out := check(r, now, 0); out.Detected != nil {
			t.Fatalf("at %d, after the first candidate answered: reported %+v", now, out.Detected)
		}
	}
	if st := r.Stats(); st.BlocksWaited != 1 || r.Emitter() != 13 {
		t.Fatalf("stats %+v, emitter %d", st, r.Emitter())
	}
}

// The same round when the candidates are really dead: reported one
// time-out later.
func TestRingSilentWindowReportedAfterTheWait(t *testing.T) {
	r := stormRing(t)
	r.Heard(111, 9)
	r.Heard(112, 1)
	var out hb.Output
	for now := int64(120); out.Detected == nil && now < 600; now += 10 {
		out = check(r, now, 0)
	}
	if out.Detected == nil || out.Detected.At < 300 || !slices.Equal(append([]ranks.Rank{out.Detected.Dead}, out.Detected.More...), []ranks.Rank{13, 12, 11, 10, 14}) {
		t.Fatalf("resolution %+v", out.Detected)
	}
}

// A round's tail shows how long its probes took to leave (its latency
// beyond the first answer's, over the probes before it); a later round
// without a tail of its own (its candidates take in the ranks after
// Self) counts the time its probes take at that cost into its deadline.
func TestRingSendTimeCounted(t *testing.T) {
	r := stormRing(t) // round 1 at 110: canaries 9 and 0, candidates 13 … 10, tail 1
	r.Heard(111, 0)   // the first answer: a round trip of 1
	r.Heard(130, 1)   // the tail: 18 more for 6 probes before it, 3 each
	out := check(r, 210, 0)
	if out.Detected == nil || out.Probe == nil {
		t.Fatalf("round 1 at its deadline: %+v", out)
	}
	// Round 2: candidates 9 … 2, canaries 1 and 0, no tail: 10 probes, 30.
	if got, want := r.SuspectDeadline(), int64(210+100+30); got != want {
		t.Fatalf("round 2's deadline %d, want %d (probes %v)", got, want, out.Probe)
	}
}

// A round of more candidates than it looks through one by one (100 here)
// takes an answer from a candidate deep in its window (after a message
// from a rank it did not probe) and reports exactly the silent candidates
// before the one that answered.
func TestRingLargeRoundAnswer(t *testing.T) {
	r, out := suspected(t, hb.RingConfig{Self: 1023, N: 1024, Delta: 100, Probe: 100})
	if out.Detected == nil || out.Detected.Dead != 1022 || len(out.Probe) < 100 {
		t.Fatalf("T3: %+v", out)
	}
	r.Heard(112, 500) // not probed: no answer of this round
	r.Heard(113, 950) // c72
	var det *hb.Detection
	for now := int64(114); now < 2000 && det == nil; now += 5 {
		det = check(r, now, 0).Detected
	}
	var want []ranks.Rank
	for c := ranks.Rank(1021); c > 950; c-- {
		want = append(want, c)
	}
	if det == nil || det.Dead != want[0] || !slices.Equal(det.More[:len(want)-1], want[1:]) || r.Emitter() != 950 {
		t.Fatalf("reported %+v, emitter %d; want %v and emitter 950", det, r.Emitter(), want)
	}
	if r.Dead().Has(500) || r.Dead().Has(950) {
		t.Fatalf("a rank that answered or was not probed is held dead: %v", r.Dead())
	}
}
