package detector_test

import (
	"testing"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// A rank some hold dead and others alive is settled by an agreement: its
// detector's broadcast reached rank 6 only, the paused rank resumed, and
// nothing else (zombie check, repair, EVICTED) crossed the gap. After one
// agreement every survivor holds it dead, and the rank itself, named in
// the decision's dead set, has stopped.
func TestAgreementSettlesADisagreement(t *testing.T) {
	c := newCluster(t, 8, func(cfg *detector.Config) { cfg.Zombies = false })
	c.run(3 * delta)
	c.lose = func(from, to ranks.Rank, m wire.Message) bool {
		switch m.(type) {
		case *wire.Bcast, *wire.Sync, *wire.Evicted:
			return to != 6
		}
		return false
	}
	c.crashed[2], c.beating[2] = true, false // paused: no heartbeat, no check
	for i := 0; i < 20 && len(c.events[3]) == 0; i++ {
		c.run(delta / 5)
	}
	if got := c.gone(3); len(got) != 1 || got[0] != 2 {
		t.Fatalf("rank 3 (the paused rank's observer) knows %v gone, want [2]", got)
	}
	c.crashed[2], c.beating[2] = false, true // resumed at once
	for _, r := range []ranks.Rank{0, 1, 4, 5, 7} {
		if len(c.events[r]) != 0 {
			t.Fatalf("rank %d knows %v gone before the agreement: the disagreement is not set up", r, c.gone(r))
		}
	}
	c.lose = nil
	c.agree(detector.OpMax, func(r ranks.Rank) []byte { return make([]byte, 8) })
	c.deliver()
	if !c.evicted[2] || !c.cores[2].Evicted() {
		t.Fatal("rank 2, in the decided dead set, did not stop")
	}
	for r := range c.cores {
		if r == 2 {
			continue
		}
		d, ok := c.lastDecision(ranks.Rank(r))
		if !ok || !d.Dead.Equal(ranks.Of(2)) {
			t.Fatalf("rank %d: decision %+v (%v), want dead set [2]", r, d, ok)
		}
	}
	c.wantGone(2)
	for _, r := range []ranks.Rank{0, 1, 4, 5, 7} {
		if ev := c.events[r][0]; ev.Detector != 2 || ev.Left {
			t.Fatalf("rank %d: event %+v, want a crash learned from the agreement (Detector = Rank)", r, ev)
		}
		if s := c.cores[r].Stats(); s.DeathsAgreed != 1 {
			t.Fatalf("rank %d: DeathsAgreed = %d, want 1", r, s.DeathsAgreed)
		}
	}
	c.run(6 * delta)
	c.wantGone(2) // the job goes on with the agreed membership, reporting nobody else
}
