package hb_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

func TestRingConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  hb.RingConfig
		want string
	}{
		{hb.RingConfig{Self: 0, N: 0, Delta: 1}, "N"},
		{hb.RingConfig{Self: 4, N: 4, Delta: 1}, "Self"},
		{hb.RingConfig{Self: 0, N: 4, Delta: 0}, "Delta"},
	} {
		_, err := hb.NewRing(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one naming %s", tc.cfg, err, tc.want)
		}
	}
}

func TestInitialRing(t *testing.T) {
	r, _ := hb.NewRing(hb.RingConfig{Self: 0, N: 5, Delta: 10})
	if r.Emitter() != 4 || r.Observer() != 1 {
		t.Fatalf("rank 0 of 5: emitter %d observer %d, want 4 and 1", r.Emitter(), r.Observer())
	}
}

// TestT2T3 drives one core by hand: heartbeats postpone suspicion by δ;
// silence for δ triggers T3 with FindEmitter skipping known-dead ranks and
// a 2δ grace for the new emitter.
func TestT2T3(t *testing.T) {
	r, _ := hb.NewRing(hb.RingConfig{Self: 5, N: 8, Delta: 100})
	r.Start(0, 100)
	r.Learn(0, []ranks.Rank{3})
	if out := check(r, 50, 1); out.Detected != nil {
		t.Fatal("suspected after a heartbeat")
	}
	if out := check(r, 149, 1); out.Detected != nil {
		t.Fatal("suspected before δ elapsed since the last heartbeat")
	}
	out := check(r, 150, 1)
	if out.Detected == nil || out.Detected.Dead != 4 || out.Detected.Left {
		t.Fatalf("T3 did not fire for emitter 4: %+v", out)
	}
	if !out.SendNewObserver || out.NewObserverTo != 2 || r.Emitter() != 2 {
		t.Fatalf("FindEmitter should skip dead 3 and pick 2: %+v emitter %d", out, r.Emitter())
	}
	if !out.Detected.D.Has(3) || !out.Detected.D.Has(4) {
		t.Fatalf("broadcast D %v lacks 3 or 4", out.Detected.D)
	}
	if r.Deadline() != 350 {
		t.Fatalf("new emitter deadline %d, want now+2δ = 350", r.Deadline())
	}
	if out := check(r, 349, 0); out.Detected != nil {
		t.Fatal("new emitter suspected inside its 2δ grace")
	}
	if out := check(r, 300, 7); out.Detected != nil || r.Deadline() != 400 {
		t.Fatalf("heartbeat of the new emitter did not reset SUSP-TIMEOUT to δ: %d", r.Deadline())
	}
}

func TestT4NewObserver(t *testing.T) {
	r, _ := hb.NewRing(hb.RingConfig{Self: 2, N: 8, Delta: 100})
	out, err := r.NewObserver(0, 5)
	if err != nil || !out.ObserverChanged || r.Observer() != 5 {
		t.Fatalf("T4: %+v %v observer %d", out, err, r.Observer())
	}
	if _, err := r.NewObserver(0, 8); err == nil {
		t.Fatal("NEWOBSERVER from rank 8 of 8 accepted")
	}
	r.Learn(0, []ranks.Rank{6})
	if out, _ := r.NewObserver(0, 6); out.ObserverChanged {
		t.Fatal("NEWOBSERVER from a known-dead rank accepted")
	}
}

func TestLeaveIsNotACrash(t *testing.T) {
	obs, _ := hb.NewRing(hb.RingConfig{Self: 3, N: 6, Delta: 100})
	leaver, _ := hb.NewRing(hb.RingConfig{Self: 2, N: 6, Delta: 100})
	to, hisEmitter := leaver.Leave()
	if to != 3 || hisEmitter != 1 {
		t.Fatalf("Leave: tell %d hand over %d", to, hisEmitter)
	}
	out, err := obs.Departed(10, 2, hisEmitter)
	if err != nil || out.Detected == nil || !out.Detected.Left || out.NewObserverTo != 1 || obs.Emitter() != 1 {
		t.Fatalf("Departed: %+v %v emitter %d", out, err, obs.Emitter())
	}
	if out := check(leaver, 1e9, 0); out.Detected != nil {
		t.Fatal("a departed rank still suspects")
	}
}

func TestAloneRankNeverSuspects(t *testing.T) {
	r, _ := hb.NewRing(hb.RingConfig{Self: 0, N: 1, Delta: 10})
	r.Start(0, 10)
	if !r.Alone() || check(r, 1e12, 0).Detected != nil {
		t.Fatal("single rank suspected someone")
	}
}

// checkScenario kills the given ranks at the given times, runs to stability
// and checks accuracy, completeness and the bound T(f) of Theorem 1.
func checkScenario(t *testing.T, name string, n int, seed uint64, kills map[ranks.Rank]int64) {
	t.Helper()
	s := newRingSim(n, seed)
	first, last := int64(1<<62), int64(0)
	for r, at := range kills {
		s.kill(r, at)
		first, last = min(first, at), max(last, at)
	}
	f := len(kills)
	bound := hb.Bound(f, n-f+f, s.delta, s.effT())
	stable := s.runUntilStable(last, first+bound+s.delta*10)
	if len(s.falseSuspicion) > 0 {
		t.Fatalf("%s: false suspicions: %v", name, s.falseSuspicion)
	}
	if stable < 0 {
		t.Fatalf("%s: not stable %v after the first failure (bound %v):%s", name, bound+10*s.delta, bound, s.describe())
	}
	if took := stable - first; took > bound {
		t.Fatalf("%s: stabilised in %.1f ms > T(%d) = %.1f ms", name, float64(took)/1e6, f, float64(bound)/1e6)
	}
	// Every alive rank learned every death (completeness), with the time.
	for _, p := range s.aliveSet() {
		for d := range kills {
			if _, ok := s.nodes[p].learnt[d]; !ok {
				t.Fatalf("%s: rank %d never learned %d", name, p, d)
			}
		}
	}
}

// TestLemma1Cases runs every case of the proof of Lemma 1 on a 16-rank ring.
func TestLemma1Cases(t *testing.T) {
	const n = 16
	t0 := 200 * ms
	eps := 3 * ms // within R(1): the failures overlap
	cases := []struct {
		name  string
		kills map[ranks.Rank]int64
	}{
		{"single failure", map[ranks.Rank]int64{5: t0}},
		{"new segment of length 1, away from others", map[ranks.Rank]int64{5: t0, 11: t0 + eps}},
		{"before a segment, predecessor alive", map[ranks.Rank]int64{5: t0, 4: t0 + eps}},
		{"before a segment, predecessor dead (merge)", map[ranks.Rank]int64{3: t0, 5: t0, 4: t0 + eps}},
		{"after a segment: observer dies before detecting", map[ranks.Rank]int64{5: t0, 6: t0 + eps}},
		{"after a segment: observer dies while detecting", map[ranks.Rank]int64{5: t0, 6: t0 + 50*ms + 7*ms}},
		{"after a segment: its successor is the first of another", map[ranks.Rank]int64{5: t0, 7: t0, 6: t0 + eps}},
		{"f = ⌊log2 n⌋-1 consecutive, growing backwards", map[ranks.Rank]int64{9: t0, 8: t0 + eps, 7: t0 + 2*eps}},
		{"f = ⌊log2 n⌋-1 consecutive, growing forwards", map[ranks.Rank]int64{7: t0, 8: t0 + eps, 9: t0 + 2*eps}},
		{"f = ⌊log2 n⌋-1 consecutive, simultaneous", map[ranks.Rank]int64{7: t0, 8: t0, 9: t0}},
		{"wrap-around segment", map[ranks.Rank]int64{15: t0, 0: t0 + eps, 1: t0 + 2*eps}},
	}
	for _, tc := range cases {
		for seed := uint64(0); seed < 20; seed++ {
			checkScenario(t, tc.name, n, seed, tc.kills)
		}
	}
}

// TestRandomOverlappingFailures: up to ⌊log2 n⌋−1 overlapping failures at
// random places (consecutive half of the time) and random times within R(1).
func TestRandomOverlappingFailures(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	trials := 300
	if testing.Short() {
		trials = 60
	}
	for trial := 0; trial < trials; trial++ {
		n := []int{4, 8, 16, 32, 64}[rng.IntN(5)]
		f := 1 + rng.IntN(max(1, hb.MaxOverlapping(n)))
		kills := map[ranks.Rank]int64{}
		start := ranks.Rank(rng.IntN(n))
		for len(kills) < f {
			var r ranks.Rank
			if trial%2 == 0 {
				r = (start + ranks.Rank(len(kills))) % ranks.Rank(n)
			} else {
				r = ranks.Rank(rng.IntN(n))
			}
			if _, dup := kills[r]; !dup {
				kills[r] = 200*ms + rng.Int64N(60*ms)
			}
		}
		checkScenario(t, "random", n, uint64(trial), kills)
	}
}

// TestNoFalseSuspicionFailureFree: a long failure-free run suspects nobody.
func TestNoFalseSuspicionFailureFree(t *testing.T) {
	s := newRingSim(32, 1)
	s.run(20_000 * ms)
	if s.detections != 0 || len(s.falseSuspicion) != 0 {
		t.Fatalf("%d detections in a failure-free run: %v", s.detections, s.falseSuspicion)
	}
	if !s.stable() {
		t.Fatalf("failure-free ring not stable:%s", s.describe())
	}
}

func TestBlockBound(t *testing.T) {
	const d, tt = 50, 1
	for _, c := range []struct {
		b, w   int
		rounds int64
	}{{1, 8, 1}, {8, 8, 1}, {9, 8, 2}, {24, 8, 2}, {25, 8, 3}, {15, 16, 1}} {
		want := (c.rounds+1)*d + tt + hb.BroadcastTime(16, tt)
		if got := hb.BlockBound(c.b, c.w, 16, d, tt); got != want {
			t.Errorf("BlockBound(b=%d, w=%d) = %d, want %d (%d rounds)", c.b, c.w, got, want, c.rounds)
		}
	}
	if hb.BlockBound(4, 16, 16, d, tt) != hb.Bound(1, 16, d, tt) {
		t.Error("a block within the window is not bounded by T(1)")
	}
}

// Block mending at the ring level: the probes of a round, an answer of
// another round ignored, the silent candidates reported in one detection,
// and the first that answered adopted.
func TestRingBlockMending(t *testing.T) {
	const d = 100
	r, err := hb.NewRing(hb.RingConfig{Self: 7, N: 8, Delta: d, Probe: 4})
	if err != nil {
		t.Fatal(err)
	}
	r.Start(0, d)
	check(r, 10, 1)
	out := check(r, 10+d, 1) // emitter 6 silent for δ: T3
	if out.Detected == nil || out.Detected.Dead != 6 || !out.SendNewObserver || out.NewObserverTo != 5 {
		t.Fatalf("T3: %+v", out)
	}
	if !probesFirst(out.Probe, []ranks.Rank{5, 4, 3, 2}) || out.ProbeRound != 1 || !r.Probing() {
		t.Fatalf("probes %v round %d", out.Probe, out.ProbeRound)
	}
	r.Alive(3, 1)
	r.Alive(4, 2)      // another round: ignored
	r.Heard(10+d+1, 0) // the tail canary: every probe was sent
	r.Alive(6, 1)      // not probed: ignored
	if out := check(r, 10+d+d/2, 0); out.Detected != nil {
		t.Fatalf("resolved before the probe time-out: %+v", out)
	}
	out = check(r, 10+2*d, 0)
	if out.Detected == nil || out.Detected.Dead != 5 || !slices.Equal(out.Detected.More, []ranks.Rank{4, 6}) {
		t.Fatalf("resolution: %+v", out.Detected)
	}
	if r.Emitter() != 3 || !out.SendNewObserver || out.NewObserverTo != 3 || r.Probing() {
		t.Fatalf("emitter %d, %+v", r.Emitter(), out)
	}
	if !r.Dead().Has(4) || !r.Dead().Has(5) || r.Dead().Has(3) {
		t.Fatalf("D = %v", r.Dead())
	}
	// The emitter heartbeats: nothing more is reported.
	if out := check(r, 10+2*d+5, 1); out.Detected != nil {
		t.Fatalf("%+v", out)
	}
}

// hostsOf labels n ranks placed k per host: rank r on host r/k.
func hostsOf(n, k int) []uint32 {
	h := make([]uint32, n)
	for r := range h {
		h[r] = uint32(r / k)
	}
	return h
}

// rankRange returns hi, hi−1, …, lo.
func rankRange(hi, lo ranks.Rank) []ranks.Rank {
	var out []ranks.Rank
	for k := int(hi); k >= int(lo); k-- {
		out = append(out, ranks.Rank(k))
	}
	return out
}

// The candidates of a first round with host labels: the W first
// predecessors plus the rest of the first candidate's host, skipping (not
// stopping at) ranks known dead, stopping at Self; without labels, W.
func TestRingHostCandidates(t *testing.T) {
	const d = 100
	for _, c := range []struct {
		name      string
		self      ranks.Rank
		n, k, w   int
		dead      []ranks.Rank // known dead before the crash
		want      []ranks.Rank // the round's probes when self's emitter dies
		unlabeled []ranks.Rank
	}{
		{"last rank of a host of 32", 64, 128, 32, 4, nil, rankRange(62, 32), rankRange(62, 59)},
		{"window beyond the host", 64, 128, 4, 8, nil, rankRange(62, 55), rankRange(62, 55)},
		{"emitter first of its host: the host before", 65, 128, 32, 4, nil, rankRange(63, 32), rankRange(63, 60)},
		{"known dead skipped inside the host", 64, 128, 32, 4, []ranks.Rank{50, 51, 40}, append(rankRange(62, 52), append(rankRange(49, 41), rankRange(39, 32)...)...), rankRange(62, 59)},
		{"self on the host: stops at self", 40, 64, 64, 4, nil, append(rankRange(38, 0), rankRange(63, 41)...), rankRange(38, 35)},
		{"cyclic placement adds nothing", 10, 16, 1, 3, nil, rankRange(8, 6), rankRange(8, 6)},
	} {
		for _, labelled := range []bool{true, false} {
			cfg := hb.RingConfig{Self: c.self, N: c.n, Delta: d, Probe: c.w}
			want := c.unlabeled
			if labelled {
				cfg.Hosts, want = hostsOf(c.n, c.k), c.want
				if c.k == 1 {
					for r := range cfg.Hosts {
						cfg.Hosts[r] = uint32(r % 2) // two hosts, alternate ranks
					}
				}
			}
			r, err := hb.NewRing(cfg)
			if err != nil {
				t.Fatal(err)
			}
			r.Start(0, d)
			r.Learn(0, c.dead)
			check(r, 10, 1)
			out := check(r, 10+d, 1)
			if out.Detected == nil || !probesFirst(out.Probe, want) {
				t.Errorf("%s (labels %v): detected %+v, probes %v, want %v", c.name, labelled, out.Detected, out.Probe, want)
			}
		}
	}
}

// A dead host of 32 with a window of 4 is resolved in one round when
// labelled, and a live rank of the host (one survivor) answers and is
// adopted, never reported; early probes probe the same candidates.
func TestRingHostMending(t *testing.T) {
	const d = 100
	for _, early := range []int64{0, d / 2} {
		r, err := hb.NewRing(hb.RingConfig{Self: 64, N: 128, Delta: d, Probe: 4, ProbeAfter: early, Hosts: hostsOf(128, 32)})
		if err != nil {
			t.Fatal(err)
		}
		r.Start(0, d)
		check(r, 10, 1)
		var probes []ranks.Rank
		var out hb.Output
		for now := int64(20); out.Detected == nil; now += 10 {
			out = check(r, now, 1)
			if out.Probe != nil {
				probes = out.Probe
			}
			if now > 10+d {
				t.Fatal("no detection")
			}
		}
		if !probesFirst(probes, rankRange(62, 32)) {
			t.Fatalf("early %d: probes %v", early, probes)
		}
		r.Alive(40, r.Round())       // rank 40 of the host survived
		r.Heard(out.Detected.At, 66) // the tail: every probe was sent
		at := out.Detected.At
		out = check(r, at+d-early, 0)
		if out.Detected == nil || !slices.Equal(append([]ranks.Rank{out.Detected.Dead}, out.Detected.More...), append(rankRange(62, 41), 63)) {
			t.Fatalf("early %d: resolution %+v", early, out.Detected)
		}
		if r.Emitter() != 40 || r.Dead().Has(40) || r.Probing() {
			t.Fatalf("early %d: emitter %d, D %v", early, r.Emitter(), r.Dead())
		}
	}
}

func TestHostLabels(t *testing.T) {
	if got := hb.HostLabels([]string{"b", "b", "a", "b", "c"}); !slices.Equal(got, []uint32{0, 0, 1, 0, 2}) {
		t.Errorf("labels %v", got)
	}
	for _, names := range [][]string{nil, {"a", "a"}, {"a", ""}} {
		if got := hb.HostLabels(names); got != nil {
			t.Errorf("HostLabels(%q) = %v, want nil", names, got)
		}
	}
	if _, err := hb.NewRing(hb.RingConfig{N: 4, Delta: 1, Hosts: []uint32{0, 1}}); err == nil || !strings.Contains(err.Error(), "Hosts") {
		t.Errorf("2 labels for 4 ranks: %v", err)
	}
}

func TestHostBlockBound(t *testing.T) {
	const d, tt, n = 50, 1, 4096
	one := hb.Bound(1, n, d, tt)
	for _, c := range []struct {
		b, hosts, w int
		rounds      int64
	}{{64, 1, 16, 1}, {1000, 1, 16, 1}, {128, 2, 16, 2}, {65, 2, 16, 2}, {256, 4, 16, 4}, {8, 2, 16, 1}, {400, 40, 16, 5}} {
		want := (c.rounds+1)*d + tt + hb.BroadcastTime(n, tt)
		if got := hb.HostBlockBound(c.b, c.hosts, c.w, n, d, tt); got != want {
			t.Errorf("HostBlockBound(b=%d, hosts=%d, w=%d) = %d, want %d (%d rounds)", c.b, c.hosts, c.w, got, want, c.rounds)
		}
	}
	if hb.HostBlockBound(64, 1, 16, n, d, tt) != one {
		t.Error("a whole host is not bounded by T(1)")
	}
}

// EarlyProbeAfter's silence is reached at the same check whatever the
// checks' jitter (up to a fifth of a check either way, on the check that
// saw the growth and on the later ones: less than half a check between
// them), never at the first check without
// growth, at the first check at or past 0.4δ or the second, and never
// past δ/2 by more than the granularity.
func TestEarlyProbeAfter(t *testing.T) {
	const c = 1000
	for _, tc := range []struct{ delta, check, want int64 }{
		{5 * c, c, 3 * c / 2},     // δ = 5×h, checks every h: the second check, 0.4δ
		{10 * c, c, 7 * c / 2},    // the fourth, 0.4δ
		{8 * c, c, 7 * c / 2},     // the fourth, the first past 0.4δ: δ/2
		{100e6, 13e6, 45_500_000}, // δ = 100 ms, checks every 13 ms: the fourth
		{2 * c, c, c},             // coarse checks: δ/2
		{0, c, 0}, {c, 0, 0},
	} {
		if got := hb.EarlyProbeAfter(tc.delta, tc.check); got != tc.want {
			t.Errorf("EarlyProbeAfter(%d, %d) = %d, want %d", tc.delta, tc.check, got, tc.want)
		}
	}
	for ratio := int64(3); ratio <= 64; ratio++ {
		delta := ratio * c
		a := hb.EarlyProbeAfter(delta, c)
		fires := func(j0, jk int64) int64 { // the check that first sees a silence ≥ a
			for k := int64(1); ; k++ {
				if k*c+jk-j0 >= a {
					return k
				}
			}
		}
		k := fires(0, 0)
		for _, j0 := range []int64{-c / 5, 0, c / 5} {
			for _, jk := range []int64{-c / 5, 0, c / 5} {
				if got := fires(j0, jk); got != k {
					t.Errorf("δ = %d checks: jitter %d/%d moves the early round from check %d to %d", ratio, j0, jk, k, got)
				}
			}
		}
		if k < 2 || k*c < 2*delta/5 && k > 2 || k*c >= max(2*c, 2*delta/5+c) || k*c > delta/2+c/2 {
			t.Errorf("δ = %d checks: early round at check %d", ratio, k)
		}
	}
}

// With EarlyProbeAfter and a check per period, one missing beat starts no
// round; a second one in a row starts an early round, which a late beat
// ends without a report.
func TestRingEarlyProbeSecondCheck(t *testing.T) {
	const h, d = 10, 50
	r, err := hb.NewRing(hb.RingConfig{Self: 5, N: 8, Delta: d, Probe: 4, ProbeAfter: hb.EarlyProbeAfter(d, h)})
	if err != nil {
		t.Fatal(err)
	}
	r.Start(0, d)
	seq := uint64(1)
	now := int64(h)
	check(r, now, seq)
	for range 3 { // one beat missing at a time
		now += h
		if out := check(r, now, seq); out.Probe != nil || out.Detected != nil {
			t.Fatalf("one missing beat at %d: %+v", now, out)
		}
		seq++
		now += h
		check(r, now, seq)
	}
	if r.Round() != 0 {
		t.Fatalf("%d rounds for single missing beats", r.Round())
	}
	now += h
	check(r, now, seq)
	now += h
	out := check(r, now, seq)
	if !probesFirst(out.Probe, []ranks.Rank{3, 2, 1, 0}) || !r.Probing() {
		t.Fatalf("second check without growth: %+v", out)
	}
	seq++
	now += h
	if out := check(r, now, seq); out.Detected != nil || r.Probing() {
		t.Fatalf("late beat: %+v, probing %v", out, r.Probing())
	}
}

// probesFirst reports whether a round's probes are the candidates want,
// after at most two canaries (controls) and before at most one (the tail),
// none of them a candidate.
func probesFirst(probes, want []ranks.Rank) bool {
	for head := range 3 {
		if head > len(probes) {
			break
		}
		rest := probes[head:]
		if len(rest) < len(want) || len(rest)-len(want) > 1 || !slices.Equal(rest[:len(want)], want) {
			continue
		}
		controls := append(slices.Clone(probes[:head]), rest[len(want):]...)
		if !slices.ContainsFunc(controls, func(c ranks.Rank) bool { return slices.Contains(want, c) }) {
			return true
		}
	}
	return false
}
