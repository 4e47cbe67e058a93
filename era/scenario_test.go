package era

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

// scriptNet is a hand-driven network for deterministic scenarios.
type scriptNet struct {
	t       *testing.T
	n       int
	cores   []*Core
	alive   []bool
	pending []pmsg
	decs    []map[ID]*Decision
}

type pmsg struct {
	from, to ranks.Rank
	m        Msg
}

func newScriptNet(t *testing.T, tree Tree, n int, op Op, lit literalRules) *scriptNet {
	s := &scriptNet{t: t, n: n}
	for p := range n {
		c := NewCore(ranks.Rank(p), n, tree, op)
		c.literal = lit
		s.cores = append(s.cores, c)
		s.alive = append(s.alive, true)
		s.decs = append(s.decs, map[ID]*Decision{})
	}
	return s
}

func (s *scriptNet) apply(p ranks.Rank, outs []Out) {
	for _, o := range outs {
		if o.Decided != nil {
			if s.decs[p][o.Decided.ID] != nil {
				s.t.Fatalf("rank %d decided %v twice", p, o.Decided.ID)
			}
			s.decs[p][o.Decided.ID] = o.Decided
			continue
		}
		s.pending = append(s.pending, pmsg{p, o.To, o.Msg})
	}
}

func (s *scriptNet) start(id ID, value func(p ranks.Rank) []byte) {
	for p := range s.n {
		if s.alive[p] {
			outs, err := s.cores[p].Start(id, Contribution{Value: value(ranks.Rank(p))})
			if err != nil {
				s.t.Fatal(err)
			}
			s.apply(ranks.Rank(p), outs)
		}
	}
}

// deliver delivers, in order, the pending messages matching f (including
// those sent meanwhile) and returns how many it delivered.
func (s *scriptNet) deliver(f func(pmsg) bool) int {
	k := 0
	for {
		i := slices.IndexFunc(s.pending, f)
		if i < 0 {
			return k
		}
		x := s.pending[i]
		s.pending = slices.Delete(s.pending, i, i+1)
		if s.alive[x.to] {
			s.apply(x.to, s.cores[x.to].Step(x.from, x.m))
			k++
		}
	}
}

func (s *scriptNet) drop(f func(pmsg) bool) { s.pending = slices.DeleteFunc(s.pending, f) }

func (s *scriptNet) crash(p ranks.Rank) { s.alive[p] = false }

func (s *scriptNet) detect(p, dead ranks.Rank) {
	if s.alive[p] {
		s.apply(p, s.cores[p].Dead(dead))
	}
}

// detectAll tells every alive process about every crashed one.
func (s *scriptNet) detectAll() {
	for p := range s.n {
		for q := range s.n {
			if !s.alive[q] {
				s.detect(ranks.Rank(p), ranks.Rank(q))
			}
		}
	}
}

func all(pmsg) bool { return true }

func kind(k Kind) func(pmsg) bool { return func(x pmsg) bool { return x.m.Kind == k } }

func link(from, to ranks.Rank) func(pmsg) bool {
	return func(x pmsg) bool { return x.from == from && x.to == to }
}

func from(p ranks.Rank) func(pmsg) bool { return func(x pmsg) bool { return x.from == p } }

func oneHot7(p ranks.Rank) []byte { return oneHot(7, p) }

// The in-flight DOWN scenario on the binary tree of Figure 1b: root 0
// decides v and dies after its DOWN reached 2 only; 2 decides, sends DOWN
// to 5 and 6 and dies with both in flight. 1 becomes root, asks 3, 4 and
// (after learning 2 died) 5 and 6 for their contribution, and decides v'
// without 0's and 2's values. Then 2's DOWN reaches 5.
func inFlightDown(t *testing.T, lit literalRules) *scriptNet {
	s := newScriptNet(t, Binary(7), 7, BitOR, lit)
	id := ID{Seq: 1}
	s.start(id, oneHot7)
	s.deliver(kind(Up))
	if s.decs[0][id] == nil {
		t.Fatal("root did not decide")
	}
	s.crash(0)
	s.drop(link(0, 1))
	s.deliver(link(0, 2))
	if s.decs[2][id] == nil {
		t.Fatal("2 did not decide")
	}
	s.crash(2) // DOWN 2→5 and 2→6 stay in flight
	s.detect(1, 0)
	s.detect(1, 2)
	s.deliver(func(x pmsg) bool { return x.from == 1 && x.m.Kind == ResultRequest || x.to == 1 && x.m.Kind == Up })
	if s.decs[1][id] == nil {
		t.Fatal("1 did not decide")
	}
	s.deliver(link(2, 5))
	return s
}

// TestLiteralRequestRuleDisagrees shows why a RESULTREQUEST carries the
// root's dead set: with the printed rule (mark only r < q dead) process 5
// accepts the stale DOWN of its dead parent 2 after answering 1, and two
// alive processes decide differently.
func TestLiteralRequestRuleDisagrees(t *testing.T) {
	id := ID{Seq: 1}
	s := inFlightDown(t, literalRules{rrMarksElders: true})
	d1, d5 := s.decs[1][id], s.decs[5][id]
	if d5 == nil || bytes.Equal(d1.Value, d5.Value) {
		t.Fatalf("expected the literal rule to let 5 decide differently from 1: %v vs %v", d1, d5)
	}

	s = inFlightDown(t, literalRules{})
	if s.decs[5][id] != nil {
		t.Fatal("5 accepted a DOWN from a parent its root knows dead")
	}
	s.deliver(all)
	s.detectAll()
	s.deliver(all)
	want := s.decs[1][id]
	if got := bitsOf(want.Value, 7); !slices.Equal(got, []ranks.Rank{1, 3, 4, 5, 6}) || !want.Dead.Equal(ranks.Of(0, 2)) || !want.Unacked {
		t.Fatalf("1 decided %v dead %v unacked %v", got, want.Dead, want.Unacked)
	}
	for p := range 7 {
		if s.alive[p] {
			if d := s.decs[p][id]; d == nil || !bytes.Equal(d.Value, want.Value) || !d.Dead.Equal(want.Dead) {
				t.Fatalf("rank %d decided %+v, want %+v", p, d, want)
			}
		}
	}
}

// TestLiteralDownGuardHangs shows why a root accepts a DOWN from anyone:
// 0 decides and dies after reaching 2 only; the new root 1 asks 2, which
// answers with DOWN. With the printed guard (q = Parent(S_p, p), never true
// at a root) 1 waits forever for an UP from 2.
func TestLiteralDownGuardHangs(t *testing.T) {
	id := ID{Seq: 1}
	for _, lit := range []literalRules{{downNeedsParent: true}, {}} {
		s := newScriptNet(t, Binary(7), 7, BitOR, lit)
		s.start(id, oneHot7)
		s.deliver(kind(Up))
		s.crash(0)
		s.drop(link(0, 1))
		s.deliver(all)
		s.detectAll()
		s.deliver(all)
		if lit.downNeedsParent {
			if s.decs[1][id] != nil {
				t.Fatal("with the printed guard, 1 should never decide")
			}
			continue
		}
		v := s.decs[2][id]
		for p := 1; p < 7; p++ {
			if d := s.decs[p][id]; d == nil || !bytes.Equal(d.Value, v.Value) {
				t.Fatalf("rank %d decided %+v, want %+v", p, d, v)
			}
		}
		if got := bitsOf(v.Value, 7); len(got) != 7 {
			t.Fatalf("the decision of the dead root should include everyone: %v", got)
		}
	}
}

// TestNonUniformWhenRootDiesAfterDeciding documents the paper's footnote 1
// (a non-uniform agreement): the root decides v and returns, and dies
// before any DOWN leaves. Nobody alive knows v; the survivors decide v'
// without the root's contribution, with the root in the dead set and the
// flag raised.
func TestNonUniformWhenRootDiesAfterDeciding(t *testing.T) {
	id := ID{Seq: 1}
	s := newScriptNet(t, Binary(4), 4, BitOR, literalRules{})
	s.start(id, func(p ranks.Rank) []byte { return oneHot(4, p) })
	s.deliver(kind(Up))
	v := s.decs[0][id]
	if v == nil || len(bitsOf(v.Value, 4)) != 4 || v.Dead.Len() != 0 || v.Unacked {
		t.Fatalf("root decided %+v", v)
	}
	s.crash(0)
	s.drop(from(0))
	s.detectAll()
	s.deliver(all)
	for p := 1; p < 4; p++ {
		d := s.decs[ranks.Rank(p)][id]
		if d == nil || !slices.Equal(bitsOf(d.Value, 4), []ranks.Rank{1, 2, 3}) || !d.Dead.Equal(ranks.Of(0)) || !d.Unacked {
			t.Fatalf("rank %d decided %+v", p, d)
		}
	}
}

// TestAcknowledgedFailures follows ULFM's detecting, stabilizing and
// post-failure agreements: the flag is raised when a failure was not
// acknowledged by every contributor before the agreement.
func TestAcknowledgedFailures(t *testing.T) {
	const n = 8
	s := newScriptNet(t, Binary(n), n, BitAND, literalRules{})
	ones := func(ranks.Rank) []byte { return []byte{0xff} }
	startAcked := func(id ID, acked ranks.Set, v func(ranks.Rank) []byte) {
		for p := range n {
			if s.alive[p] {
				outs, err := s.cores[p].Start(id, Contribution{Value: v(ranks.Rank(p)), Acked: acked})
				if err != nil {
					t.Fatal(err)
				}
				s.apply(ranks.Rank(p), outs)
			}
		}
	}
	check := func(id ID, value byte, dead ranks.Set, unacked bool) {
		t.Helper()
		for p := range n {
			if !s.alive[p] {
				continue
			}
			d := s.decs[p][id]
			if d == nil || !bytes.Equal(d.Value, []byte{value}) || !d.Dead.Equal(dead) || d.Unacked != unacked {
				t.Fatalf("%v at %d: %+v, want %x %v %v", id, p, d, value, dead, unacked)
			}
			if got := d.Survivors(n); len(got) != n-dead.Len() {
				t.Fatalf("survivors %v", got)
			}
		}
	}
	// Failure-free.
	startAcked(ID{Seq: 1}, ranks.Set{}, ones)
	s.deliver(all)
	check(ID{Seq: 1}, 0xff, ranks.Set{}, false)
	// Detecting agreement: 5 died before it; nobody acknowledged it.
	s.crash(5)
	s.detect(2, 5)
	startAcked(ID{Seq: 2}, ranks.Set{}, func(p ranks.Rank) []byte { return []byte{0xff &^ (1 << (p % 8))} })
	s.deliver(all)
	s.detectAll()
	s.deliver(all)
	check(ID{Seq: 2}, 0xff&^0b11011111, ranks.Of(5), true)
	// Stabilizing agreement: everyone acknowledged {5}.
	startAcked(ID{Seq: 3}, ranks.Of(5), ones)
	s.deliver(all)
	check(ID{Seq: 3}, 0xff, ranks.Of(5), false)
	// Only some acknowledged: still flagged.
	for p := range n {
		if s.alive[p] {
			acked := ranks.Of(5)
			if p == 6 {
				acked = ranks.Set{}
			}
			outs, _ := s.cores[p].Start(ID{Seq: 4}, Contribution{Value: []byte{0xff}, Acked: acked})
			s.apply(ranks.Rank(p), outs)
		}
	}
	s.deliver(all)
	check(ID{Seq: 4}, 0xff, ranks.Of(5), true)
}

func TestStartErrors(t *testing.T) {
	c := NewCore(1, 4, Binary(4), Min)
	if _, err := c.Start(ID{Seq: 1}, Contribution{Value: []byte{1}}); err == nil {
		t.Fatal("Min accepted a 1-byte value")
	}
	if _, err := c.Start(ID{Seq: 1}, Contribution{Value: U64(1), Tree: Binary(4).Over([]ranks.Rank{0, 2, 3})}); err == nil {
		t.Fatal("Start accepted a tree without self")
	}
	if _, err := c.Start(ID{Seq: 1}, Contribution{Value: U64(1), Acked: ranks.Of(9)}); err == nil {
		t.Fatal("Start accepted an acked rank ≥ n")
	}
	if _, err := c.Start(ID{Seq: 1}, Contribution{Value: U64(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ID{Seq: 1}, Contribution{Value: U64(1)}); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	c.Forget(0)
	if _, err := c.Start(ID{Seq: 2}, Contribution{Value: U64(1)}); !errors.Is(err, ErrCollected) {
		t.Fatalf("Start in a forgotten epoch: %v", err)
	}
	if st := c.Stats(); st.Records != 0 {
		t.Fatalf("records after Forget: %+v", st)
	}
}

// TestMalformedMessagesAreDropped feeds a core messages that a correct
// peer never sends.
func TestMalformedMessagesAreDropped(t *testing.T) {
	c := NewCore(0, 4, Binary(4), Max)
	id := ID{Seq: 1}
	bad := []struct {
		from ranks.Rank
		m    Msg
	}{
		{1, Msg{Kind: Up, ID: id, Value: []byte{1}}},                  // fails Check
		{1, Msg{Kind: Up, ID: id, Value: U64(1), Dead: ranks.Of(7)}},  // rank ≥ n
		{1, Msg{Kind: Up, ID: id, Value: U64(1), Acked: ranks.Of(2)}}, // acked ⊄ dead
		{9, Msg{Kind: Up, ID: id, Value: U64(1)}},                     // sender ≥ n
		{0, Msg{Kind: Up, ID: id, Value: U64(1)}},                     // from self
		{1, Msg{Kind: 9, ID: id}},                                     // kind
		{1, Msg{Kind: ResultRequest, ID: id, Dead: ranks.Of(4)}},      // rank ≥ n
	}
	for _, b := range bad {
		if outs := c.Step(b.from, b.m); len(outs) != 0 {
			t.Fatalf("%+v produced %+v", b, outs)
		}
	}
	if st := c.Stats(); st.Dropped != uint64(len(bad)) || st.Records != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestConcurrentAgreements runs many concurrent agreements per schedule,
// with failures.
func TestConcurrentAgreements(t *testing.T) {
	count := 200
	if testing.Short() {
		count = 20
	}
	for i := range count {
		seed := uint64(1000 + i)
		rng := rand.New(rand.NewPCG(seed, 1))
		cfg := genSchedule([]string{"none", "multi", "root", "down"}[i%4], seed)
		cfg.name = "concurrent/" + cfg.name
		cfg.agreements = 4 + rng.IntN(5)
		cfg.sequential = false
		cfg.rebalance = false
		for j := range cfg.victims {
			if cfg.victims[j].onDecide >= 0 {
				cfg.victims[j].onDecide = rng.IntN(cfg.agreements)
			}
		}
		s := newSim(t, cfg, seed)
		s.run()
		s.check()
	}
}
