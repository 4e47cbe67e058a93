package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestStormHit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{1, 4, 8, 16, 20, 64} {
		r := stormHit(rng, 128, k, StormRanks, 8)
		if len(r) != k || len(slices.Compact(slices.Clone(r))) != k || r[0] < 0 || r[k-1] >= 128 {
			t.Errorf("ranks k=%d: %v, want %d distinct ranks of 0…127", k, r, k)
		}
		h := stormHit(rng, 128, k, StormHosts, 8)
		if len(h) != k || len(slices.Compact(slices.Clone(h))) != k {
			t.Fatalf("hosts k=%d: %v, want %d distinct ranks", k, h, k)
		}
		hosts := map[int]int{}
		for _, x := range h {
			hosts[x/8]++
		}
		partial := 0
		for _, c := range hosts {
			if c != 8 {
				partial++
			}
		}
		if len(hosts) != (k+7)/8 || partial > k%8 {
			t.Errorf("hosts k=%d: %v spans %d hosts (%d partly), want %d hosts, whole but the last", k, h, len(hosts), partial, (k+7)/8)
		}
	}
}

func TestStormOutcome(t *testing.T) {
	ms := int64(time.Millisecond)
	t0 := 1000 * ms
	// 5 ranks, 1 and 2 hit: 0, 3 and 4 report both; 4 also reports 3, and
	// memberlist's 0 saw 3 come back.
	seen := []stormReport{
		{By: 0, Dead: 1, Mono: t0 + 60*ms}, {By: 0, Dead: 2, Mono: t0 + 70*ms},
		{By: 3, Dead: 2, Mono: t0 + 65*ms}, {By: 3, Dead: 1, Mono: t0 + 90*ms},
		{By: 4, Dead: 1, Mono: t0 + 61*ms}, {By: 4, Dead: 2, Mono: t0 + 62*ms}, {By: 4, Dead: 3, Mono: t0 + 200*ms},
		{By: 0, Dead: 3, Mono: t0 + 300*ms, Alive: true},
	}
	r := StormRun{N: 5, Hit: []int{1, 2}}
	stormOutcome(&r, seen, t0)
	if !slices.Equal(r.Lost, []int{3}) || r.Detected != 2 || !r.Complete || r.Stable != 70*time.Millisecond || r.Refuted != 1 { // 3 is lost: its 90 ms do not count
		t.Errorf("got lost %v detected %d complete %v stable %v refuted %d; want [3] 2 true 70ms 1", r.Lost, r.Detected, r.Complete, r.Stable, r.Refuted)
	}
	if r.Same { // 4 holds 3 dead, 0 does not (3 is lost, not a survivor)
		t.Error("survivors 0 and 4 reported different sets, want Same false")
	}
	// Every survivor reported the hit ranks and nothing else; 2 was
	// evicted (hit: not a loss); survivor 4 never heard of 1.
	r = StormRun{N: 5, Hit: []int{1, 2}}
	stormOutcome(&r, []stormReport{
		{By: 0, Dead: 1, Mono: t0 + 50*ms}, {By: 0, Dead: 2, Mono: t0 + 55*ms}, {By: 3, Dead: 1, Mono: t0 + 51*ms},
		{By: 3, Dead: 2, Mono: t0 + 52*ms}, {By: 4, Dead: 2, Mono: t0 + 52*ms}, {By: 2, Evicted: true, Mono: t0 + 60*ms},
	}, t0)
	if len(r.Lost) != 0 || r.Complete || r.Same || r.Stable != 0 || r.Detected != 2 {
		t.Errorf("got lost %v complete %v same %v stable %v detected %d; want none, false, false, 0, 2", r.Lost, r.Complete, r.Same, r.Stable, r.Detected)
	}
	// Every rank lost: no survivor to agree or to be complete.
	r = StormRun{N: 3, Hit: []int{1}}
	stormOutcome(&r, []stormReport{{By: 0, Dead: 2, Mono: t0 + ms}, {By: 2, Dead: 0, Mono: t0 + ms}}, t0)
	if !slices.Equal(r.Lost, []int{0, 2}) || r.Complete || r.Same || r.Stable != 0 {
		t.Errorf("got lost %v complete %v same %v stable %v; want [0 2] false false 0", r.Lost, r.Complete, r.Same, r.Stable)
	}
	// A rank reported before the burst is neither lost nor a survivor.
	r = StormRun{N: 4, Hit: []int{1}}
	stormOutcome(&r, []stormReport{{By: 0, Dead: 3, Mono: t0 - ms}, {By: 3, Evicted: true, Mono: t0 + ms},
		{By: 0, Dead: 1, Mono: t0 + ms}, {By: 2, Dead: 1, Mono: t0 + 2*ms}}, t0)
	if len(r.Lost) != 0 || r.Before != 1 || !r.Complete || !r.Same || r.Stable != 2*time.Millisecond {
		t.Errorf("got lost %v before %d complete %v same %v stable %v; want none 1 true true 2ms", r.Lost, r.Before, r.Complete, r.Same, r.Stable)
	}
	// An eviction of a rank not hit is a loss.
	r = StormRun{N: 4, Hit: []int{1}}
	stormOutcome(&r, []stormReport{{By: 0, Dead: 1, Mono: t0 + ms}, {By: 2, Dead: 1, Mono: t0 + ms}, {By: 3, Evicted: true, Mono: t0 + ms}}, t0)
	if !slices.Equal(r.Lost, []int{3}) || !r.Complete || !r.Same {
		t.Errorf("got lost %v complete %v same %v; want [3] true true", r.Lost, r.Complete, r.Same)
	}
}
