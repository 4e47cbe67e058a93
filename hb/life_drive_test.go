package hb_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

// lifeJob is a job around one Ring, run as node.loop runs it: life words
// before each check and after it (flush). A rank is dead from 0 (dead),
// or alive with an event loop that handles nothing before loopAt (its
// heartbeat thread runs throughout); a live rank answers each PROBE once
// its loop runs, and heartbeats the ring's rank once its loop has handled
// NEWOBSERVER.
type lifeJob struct {
	dead    map[ranks.Rank]bool
	loopAt  map[ranks.Rank]int64
	answers map[ranks.Rank]int64 // when each owed answer arrives
	beatsAt map[ranks.Rank]int64 // when each rank's heartbeats to us start
}

// word is r's life word at now: the time of its heartbeat thread's last
// period (at 1, 11, 21, …; a dead rank's last at 1).
func (j *lifeJob) word(r ranks.Rank, now int64) uint64 {
	if j.dead[r] {
		return 1
	}
	return 1 + uint64(max(now-1, 0)/10*10)
}

func (j *lifeJob) after(r ranks.Rank, now int64) int64 { return max(now+1, j.loopAt[r]) }

// run drives r from now to end in steps of step and returns its detections.
func (j *lifeJob) run(r *hb.Ring, now, end, step int64) []*hb.Detection {
	var dets []*hb.Detection
	feed := func(now int64) {
		rs := r.WantLife(now)
		words := make([]uint64, len(rs))
		for i, k := range rs {
			words[i] = j.word(k, now)
		}
		r.Life(now, rs, words)
	}
	for ; now < end; now += step {
		feed(now)
		for k, at := range j.answers {
			if at <= now {
				r.Heard(now, k)
				delete(j.answers, k)
			}
		}
		var seq uint64 // the emitter's heartbeats to us, every 10 once started
		if at, ok := j.beatsAt[r.Emitter()]; ok && at <= now {
			seq = 1 + uint64(now-at)/10
		}
		out := check(r, now, seq)
		if out.Detected != nil {
			dets = append(dets, out.Detected)
		}
		for _, k := range out.Probe {
			if !j.dead[k] {
				j.answers[k] = j.after(k, now)
			}
		}
		if out.SendNewObserver && !j.dead[out.NewObserverTo] {
			j.beatsAt[out.NewObserverTo] = j.after(out.NewObserverTo, now)
		}
		feed(now)
	}
	return dets
}

// Rank 15 of 16 observes 14; 14 and 13 are killed after 1; 12's event loop
// handles nothing before 400, while its heartbeat thread runs; the others
// answer at once. Only 14 and 13 are reported, and 12 becomes the emitter,
// whatever the order of T3, early rounds and rounds.
func TestRingLifeWordsDriven(t *testing.T) {
	for _, probe := range []int{4, 1} {
		r, err := hb.NewRing(hb.RingConfig{Self: 15, N: 16, Delta: 50, Probe: probe, ProbeAfter: 15})
		if err != nil {
			t.Fatal(err)
		}
		r.Start(0, 50)
		check(r, 0, 1)
		j := &lifeJob{dead: map[ranks.Rank]bool{14: true, 13: true}, loopAt: map[ranks.Rank]int64{12: 400},
			answers: map[ranks.Rank]int64{}, beatsAt: map[ranks.Rank]int64{}}
		for _, d := range j.run(r, 1, 800, 5) {
			for _, k := range append([]ranks.Rank{d.Dead}, d.More...) {
				if k != 14 && k != 13 {
					t.Errorf("window %d: reported %d (detection %+v)", probe, k, d)
				}
			}
		}
		if r.Emitter() != 12 || !r.D.Has(13) || !r.D.Has(14) {
			t.Errorf("window %d: emitter %d, dead %v; want 12 and [13 14]", probe, r.Emitter(), r.D.Members())
		}
	}
}
