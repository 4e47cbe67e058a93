package detector_test

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// A quiet job: nobody is suspected, nothing is sent after start-up.
func TestQuiet(t *testing.T) {
	c := newCluster(t, 8, nil)
	c.run(20 * delta)
	c.wantGone()
	for r, core := range c.cores {
		if s := core.Stats(); s != (detector.Stats{}) {
			t.Fatalf("rank %d: %+v", r, s)
		}
	}
}

// One crash: its observer detects it, every survivor learns it once with
// the right detector, and the ring mends around it.
func TestCrashDetectedAndPropagated(t *testing.T) {
	c := newCluster(t, 8, nil)
	c.run(3 * delta)
	c.crash(3)
	c.run(4 * delta)
	c.wantGone(3)
	for r := range c.cores {
		if r != 3 && c.events[r][0].Detector != 4 {
			t.Fatalf("rank %d: detector %d, want 4", r, c.events[r][0].Detector)
		}
	}
	if e, o := c.cores[4].Emitter(), c.cores[2].Observer(); e != 2 || o != 4 {
		t.Fatalf("ring not mended: emitter of 4 is %d, observer of 2 is %d", e, o)
	}
	if c.cores[4].Stats().BcastsStarted != 1 {
		t.Fatalf("rank 4 started %d broadcasts", c.cores[4].Stats().BcastsStarted)
	}
	for r, core := range c.cores {
		if n := core.Stats().SyncsSent; n != 0 {
			t.Fatalf("rank %d sent %d SYNC messages for one failure the broadcast delivered", r, n)
		}
	}
	// And the mended ring keeps watching: the next crash is found too.
	c.crash(2)
	c.run(4 * delta)
	c.wantGone(2, 3)
}

// Three adjacent crashes at N = 8 go beyond the double hypercube's
// tolerance (repair.go's example); the dead-list repair completes every
// survivor's list.
func TestRepairCompletesDeadLists(t *testing.T) {
	c := newCluster(t, 8, nil)
	c.run(3 * delta)
	c.crash(1, 2, 3)
	c.run(10 * delta)
	c.wantGone(1, 2, 3)
	var syncs uint64
	for _, core := range c.cores {
		syncs += core.Stats().SyncsSent
	}
	learned := 0
	for _, l := range c.logs {
		if l.Msg == "learned a dead rank from SYNC" {
			learned++
		}
	}
	if learned == 0 {
		t.Fatal("no rank needed the repair: the scenario does not exercise it")
	}
	t.Logf("%d SYNC messages, %d ranks learned from them", syncs, learned)
}

// A rank paused past δ is declared dead; when it resumes, its heartbeats
// move a word held dead, and it is told to stop.
func TestZombieEvicted(t *testing.T) {
	c := newCluster(t, 6, nil)
	c.run(3 * delta)
	c.crashed[2], c.beating[2] = true, false // paused: no heartbeat, no check
	c.run(4 * delta)
	c.wantGone(2)
	c.crashed[2], c.beating[2] = false, true // resumed, with its old observer
	c.run(3 * delta)
	if !c.evicted[2] || !c.cores[2].Evicted() {
		t.Fatal("the resumed rank was not evicted")
	}
	if c.cores[3].Stats().Evictions == 0 {
		t.Fatal("rank 3 sent no EVICTED")
	}
	c.run(3 * delta)
	c.wantGone(2) // the zombie's return made nobody else suspect
}

// A rank declared dead while its view was stale (paused, or its host's
// link slowed past δ) may still tell a live rank it holds dead that it is
// evicted, counting alive the ranks it has not yet learned dead. The live
// rank holds the sender dead and goes on, in either partition mode: only
// a rank on the minority side of a healed partition obeys such a notice
// (TestPartitionAfterHeavyLosses).
func TestStaleAccuserCannotEvict(t *testing.T) {
	for _, mode := range []struct {
		name  string
		tweak func(*detector.Config)
	}{{"failstop", nil}, {"continue", continueMode}} {
		t.Run(mode.name, func(t *testing.T) {
			c := newCluster(t, 16, mode.tweak)
			c.run(3 * delta)
			c.crash(2, 5, 6, 10, 14)
			c.run(4 * delta)
			c.crashed[3], c.beating[3] = true, false // slowed past δ
			c.run(4 * delta)
			c.wantGone(2, 3, 5, 6, 10, 14)
			core := c.cores[1]
			bad := core.Stats().BadMessages
			// Rank 3's view: only rank 1 (its emitter, silent to it) dead.
			core.Step(c.time(), 3, &wire.Evicted{Rank: 1, Live: 15})
			c.flush(1)
			if c.evicted[1] || core.Evicted() {
				t.Fatal("a live rank obeyed an EVICTED from a rank it holds dead")
			}
			if got := core.Stats().BadMessages - bad; got != 1 {
				t.Fatalf("%d bad messages counted for the stale EVICTED, want 1", got)
			}
			c.run(4 * delta)
			c.wantGone(2, 3, 5, 6, 10, 14)
		})
	}
}

// A clean departure is reported as one, not as a crash.
func TestLeave(t *testing.T) {
	c := newCluster(t, 5, nil)
	c.run(3 * delta)
	to, msg, ok := c.cores[1].Leave()
	if !ok || to != 2 || msg.Rank != 1 || msg.Emitter != 0 {
		t.Fatalf("Leave: %d %+v %v", to, msg, ok)
	}
	c.crashed[1], c.beating[1] = true, false
	c.queue = append(c.queue, envelope{1, to, msg})
	c.run(4 * delta)
	c.wantGone(1)
	for r := range c.cores {
		if r != 1 && !c.events[r][0].Left {
			t.Fatalf("rank %d: departure reported as a crash", r)
		}
	}
}

// A departure whose LEAVE is lost: the observer that reads the departed
// rank's life word (hb.LifeDeparted, same host) takes it as the LEAVE, and
// every rank learns a departure; without the word the silence is reported
// as a crash.
func TestLeaveReadFromTheLifeWord(t *testing.T) {
	for _, read := range []bool{true, false} {
		c := newCluster(t, 5, nil)
		c.run(3 * delta)
		if _, _, ok := c.cores[1].Leave(); !ok {
			t.Fatal("Leave")
		}
		c.crashed[1], c.beating[1] = true, false // its LEAVE is lost
		c.run(h)
		if read {
			c.cores[2].Life(c.time(), []ranks.Rank{1}, []uint64{hb.LifeDeparted})
			c.flush(2)
		}
		c.run(4 * delta)
		c.wantGone(1)
		for r := range c.cores {
			if r != 1 && c.events[r][0].Left != read {
				t.Fatalf("word read %v: rank %d learned rank 1 gone with Left %v", read, r, c.events[r][0].Left)
			}
		}
		if got := c.cores[2].Stats().DeparturesRead; got != map[bool]uint64{true: 1, false: 0}[read] {
			t.Fatalf("word read %v: DeparturesRead %d", read, got)
		}
	}
}

// Agreements decide the same value and dead set everywhere, before and
// after a crash.
func TestAgree(t *testing.T) {
	c := newCluster(t, 8, nil)
	c.run(3 * delta)
	bit := func(r ranks.Rank) []byte { return []byte{1 << (r % 8)} }
	c.agree(detector.OpOR, bit)
	c.run(delta)
	for r := range c.cores {
		d, ok := c.lastDecision(ranks.Rank(r))
		if !ok || !bytes.Equal(d.Value, []byte{0xff}) || d.Dead.Len() != 0 || d.ID != (era.ID{Seq: 1}) {
			t.Fatalf("rank %d: %+v %v", r, d, ok)
		}
	}
	c.crash(5)
	c.run(4 * delta)
	c.agree(detector.OpOR, bit)
	c.run(2 * delta)
	for r := range c.cores {
		if r == 5 {
			continue
		}
		d, ok := c.lastDecision(ranks.Rank(r))
		if !ok || !bytes.Equal(d.Value, []byte{0xff &^ (1 << 5)}) || !slices.Equal(d.Dead.Members(), []ranks.Rank{5}) {
			t.Fatalf("rank %d: %+v %v", r, d, ok)
		}
	}
	if s := c.cores[0].AgreeStats(); s.Started != 2 || s.Decided != 2 {
		t.Fatalf("agreement stats %+v", s)
	}
}

// Nonsense is counted and logged, and changes nothing.
func TestBadInput(t *testing.T) {
	c := newCluster(t, 4, nil)
	c.run(3 * delta)
	core := c.cores[1]
	before := c.logs
	core.Step(c.time(), 2, &wire.NewObserver{Observer: 3}) // names another rank
	core.Step(c.time(), 2, &wire.Leave{Rank: 3, Emitter: 2})
	core.Step(c.time(), 2, &wire.Evicted{Rank: 2}) // about someone else
	core.Step(c.time(), 2, &wire.Agree{Op: 200})
	core.Step(c.time(), 2, &wire.Sync{Records: []wire.SyncRecord{{Rank: 2}}}) // its sender is alive
	c.flush(1)
	if got := core.Stats().BadMessages; got != 5 {
		t.Fatalf("%d bad messages counted, want 5", got)
	}
	warned := 0
	for _, l := range c.logs[len(before):] {
		if l.Level == slog.LevelWarn && l.Msg != "" {
			warned++
		}
	}
	if warned != 5 {
		t.Fatalf("%d warnings, want 5: %+v", warned, c.logs[len(before):])
	}
	if _, err := core.Agree(detector.OpCustom, nil, nil); err == nil || !strings.Contains(err.Error(), "unknown agreement operation") {
		t.Fatalf("unknown op: %v", err)
	}
	if _, err := core.Agree(detector.OpAND, &era.ID{Epoch: detector.AutoEpoch, Seq: 9}, nil); err == nil {
		t.Fatal("an explicit ID in the automatic epoch was accepted")
	}
	c.run(4 * delta)
	c.wantGone()
}

func TestNewCoreRejectsBadConfig(t *testing.T) {
	for _, cfg := range []detector.Config{
		{Self: 0, Size: 0, SuspectTimeout: delta},
		{Self: 4, Size: 4, SuspectTimeout: delta},
		{Self: 0, Size: 4, SuspectTimeout: 0},
		{Self: 0, Size: 4, SuspectTimeout: delta, AgreeRebalance: true, AgreeTree: otherTree{era.Binary(4)}},
		{Self: 0, Size: 4, SuspectTimeout: delta, Partition: detector.PartitionContinue + 1},
	} {
		if _, err := detector.NewCore(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// otherTree is a Tree that is not an *era.HeapTree.
type otherTree struct{ era.Tree }

// A rank that every broadcast of a burst misses (beyond the tolerance: 4
// crashes at N = 16) and that no later broadcast reaches learns the
// crashes from its ring neighbours' push (repair.go).
func TestRingPushCompletesAMissedBurst(t *testing.T) {
	c := newCluster(t, 16, nil)
	c.run(3 * delta)
	c.lose = func(from, to ranks.Rank, m wire.Message) bool {
		_, bc := m.(*wire.Bcast)
		return bc && to == 7
	}
	c.crash(1, 5, 10, 13)
	c.run(10 * delta)
	c.wantGone(1, 5, 10, 13)
	learned := 0
	for _, l := range c.logs {
		if l.Msg == "learned a dead rank from SYNC" {
			learned++
		}
	}
	if learned < 4 {
		t.Fatalf("%d ranks learned from SYNC, want rank 7's 4 at least", learned)
	}
}

// A rank that was stalled past δ checks its dead list with its emitter:
// here it missed a crash's broadcast (lost to it alone) and no later
// broadcast came to carry the digest; told of its stall, it asks 2δ later
// and learns it. A stall no longer than δ asks nothing.
func TestStallResync(t *testing.T) {
	c := newCluster(t, 8, nil)
	c.run(3 * delta)
	c.lose = func(from, to ranks.Rank, m wire.Message) bool {
		switch m.(type) {
		case *wire.Bcast, *wire.Sync:
			return to == 2
		}
		return false
	}
	c.crash(5)
	c.run(4 * delta)
	c.lose = nil
	c.run(4 * delta)
	if got := c.gone(2); len(got) != 0 {
		t.Fatalf("rank 2 knows %v gone: the missed broadcast is not set up", got)
	}
	c.cores[2].Stalled(c.time(), delta) // not past δ
	c.flush(2)
	c.run(3 * delta)
	if got := c.gone(2); len(got) != 0 || c.cores[2].Stats().Stalls != 0 {
		t.Fatalf("after a stall of δ: rank 2 knows %v gone, %d stalls", got, c.cores[2].Stats().Stalls)
	}
	c.cores[2].Stalled(c.time(), 3*delta)
	c.flush(2)
	c.run(delta)
	if got := c.gone(2); len(got) != 0 {
		t.Fatalf("rank 2 asked before 2δ: knows %v", got)
	}
	c.run(2 * delta)
	c.wantGone(5)
	if s := c.cores[2].Stats(); s.Stalls != 1 {
		t.Fatalf("Stalls = %d, want 1", s.Stalls)
	}
}
