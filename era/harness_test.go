package era

import (
	"bytes"
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

// The harness simulates a reliable asynchronous network and a perfect
// failure detector around n cores, with seeded math/rand/v2:
//   - every message gets a random latency and ready events are picked in
//     random order (no FIFO);
//   - a crashed process stops sending (the rest of the outputs of the step
//     in which it crashes are lost) and receiving; messages it sent before
//     are delivered or, in dropInflight schedules, lost with probability ½;
//   - after a crash, Dead(r) is called on every survivor after a random
//     delay (never before the crash: the detector is perfect).
// Every message goes through the wire encoding (see codec).
//
// Values are one-hot bitmasks combined with BitOR, so a decided value names
// exactly the set C of processes whose contribution it includes, which
// makes participation checkable exactly.

// simLiteral is copied into every core of a sim (see literalRules).
var simLiteral literalRules

type evKind uint8

const (
	evMsg evKind = iota
	evDetect
	evStart
	evCrash
)

type simEvent struct {
	at      int
	order   int
	kind    evKind
	from    ranks.Rank
	to      ranks.Rank
	msg     []byte
	k       int // agreement index for evStart
	dropped bool
}

type evHeap []*simEvent

func (h evHeap) Len() int { return len(h) }
func (h evHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].order < h[j].order
}
func (h evHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *evHeap) Push(x any)   { *h = append(*h, x.(*simEvent)) }
func (h *evHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// victim describes when one process crashes.
type victim struct {
	r ranks.Rank
	// at ≥ 0: crash at that time.
	at int
	// onDecide ≥ 0: crash right after deciding agreement onDecide, having
	// emitted a random part of that step's other outputs (DOWN phase).
	onDecide int
	// onStep ≥ 0: crash during its onStep-th step, after a random prefix
	// of the step's outputs.
	onStep int
}

type simConfig struct {
	name string
	n    int
	base *HeapTree
	op   Op
	// agreements to run; sequential: start k+1 after deciding k (with
	// Acked = previous Dead, and a rebalanced tree when rebalance is set),
	// else all are started in order at random times (Acked = Known()).
	agreements int
	sequential bool
	rebalance  bool

	victims      []victim
	dropInflight bool
	maxLatency   int
	maxDetect    int
	maxStartGap  int
	// straggle: one message in straggle (0: none) is held back for up to
	// 4·maxDetect, so stale messages of dead processes arrive late.
	straggle int
}

type decRec struct {
	p       ranks.Rank
	at      int
	value   []byte
	dead    ranks.Set
	unacked bool
}

type startRec struct {
	at    int
	acked ranks.Set
}

type sim struct {
	tb    testing.TB
	cfg   simConfig
	seed  uint64
	rng   *rand.Rand
	cores []*Core
	alive []bool
	died  []int
	steps []int

	now, order int
	ready      []*simEvent
	future     evHeap
	events     int

	victimOf map[ranks.Rank]*victim
	ids      []ID
	started  []map[int]startRec // per process: agreement index → start
	decs     map[ID][]*decRec
	decOf    []map[ID]*decRec
	treeOf   []map[int]Tree // per process: tree used for agreement k

	nonUniform int
	maxRecords int
}

func newSim(tb testing.TB, cfg simConfig, seed uint64) *sim {
	s := &sim{tb: tb, cfg: cfg, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
	n := cfg.n
	if cfg.op == nil {
		cfg.op = BitOR
		s.cfg.op = BitOR
	}
	s.cores = make([]*Core, n)
	s.alive = make([]bool, n)
	s.died = make([]int, n)
	s.steps = make([]int, n)
	s.started = make([]map[int]startRec, n)
	s.decOf = make([]map[ID]*decRec, n)
	s.treeOf = make([]map[int]Tree, n)
	for p := range n {
		s.cores[p] = NewCore(ranks.Rank(p), n, cfg.base, cfg.op)
		s.cores[p].literal = simLiteral
		s.alive[p] = true
		s.died[p] = -1
		s.started[p] = map[int]startRec{}
		s.decOf[p] = map[ID]*decRec{}
		s.treeOf[p] = map[int]Tree{}
	}
	s.decs = map[ID][]*decRec{}
	s.victimOf = map[ranks.Rank]*victim{}
	for i := range cfg.victims {
		v := &cfg.victims[i]
		s.victimOf[v.r] = v
		if v.at >= 0 {
			s.push(&simEvent{at: v.at, kind: evCrash, to: v.r})
		}
	}
	for k := range cfg.agreements {
		s.ids = append(s.ids, ID{Epoch: 7, Seq: uint64(100 + k)})
	}
	for p := range n {
		s.push(&simEvent{at: s.rng.IntN(cfg.maxStartGap + 1), kind: evStart, to: ranks.Rank(p), k: 0})
	}
	return s
}

func (s *sim) fatalf(format string, args ...any) {
	s.tb.Helper()
	s.tb.Fatalf("%s seed %d: %s", s.cfg.name, s.seed, fmt.Sprintf(format, args...))
}

func (s *sim) push(e *simEvent) {
	s.order++
	e.order = s.order
	if e.at <= s.now {
		s.ready = append(s.ready, e)
		return
	}
	heap.Push(&s.future, e)
}

// run drives the simulation to quiescence.
func (s *sim) run() {
	limit := 400000 + 4000*s.cfg.n*s.cfg.agreements
	for {
		for len(s.future) > 0 && s.future[0].at <= s.now {
			s.ready = append(s.ready, heap.Pop(&s.future).(*simEvent))
		}
		if len(s.ready) == 0 {
			if len(s.future) == 0 {
				return
			}
			s.now = s.future[0].at
			continue
		}
		i := s.rng.IntN(len(s.ready))
		e := s.ready[i]
		s.ready[i] = s.ready[len(s.ready)-1]
		s.ready = s.ready[:len(s.ready)-1]
		s.now++
		s.events++
		if s.events > limit {
			s.fatalf("no quiescence after %d events", s.events)
		}
		s.handle(e)
	}
}

func (s *sim) handle(e *simEvent) {
	p := e.to
	if e.dropped || !s.alive[p] {
		return
	}
	c := s.cores[p]
	switch e.kind {
	case evCrash:
		s.crash(p)
	case evDetect:
		s.emit(p, c.Dead(e.from))
	case evMsg:
		m, err := codec.decode(e.msg)
		if err != nil {
			s.fatalf("decoding a message from %d: %v", e.from, err)
		}
		s.emit(p, c.Step(e.from, m))
	case evStart:
		s.start(p, e.k)
	}
}

func (s *sim) start(p ranks.Rank, k int) {
	c := s.cores[p]
	ct := Contribution{Value: oneHot(s.cfg.n, p), Tree: s.cfg.base}
	if s.cfg.sequential && k > 0 {
		prev := s.decOf[p][s.ids[k-1]]
		ct.Acked = prev.dead.Clone()
		if s.cfg.rebalance {
			ct.Tree = s.cfg.base.Over(Survivors(s.cfg.n, prev.dead))
		}
	} else {
		ct.Acked = c.Known()
	}
	s.treeOf[p][k] = ct.Tree
	s.started[p][k] = startRec{at: s.now, acked: ct.Acked.Clone()}
	outs, err := c.Start(s.ids[k], ct)
	if err != nil {
		s.fatalf("rank %d Start(%v): %v", p, s.ids[k], err)
	}
	if !s.cfg.sequential && k+1 < s.cfg.agreements {
		s.push(&simEvent{at: s.now + 1 + s.rng.IntN(s.cfg.maxStartGap+1), kind: evStart, to: p, k: k + 1})
	}
	s.emit(p, outs)
}

func oneHot(n int, p ranks.Rank) []byte {
	b := make([]byte, (n+7)/8)
	b[p/8] |= 1 << (p % 8)
	return b
}

func bitsOf(b []byte, n int) []ranks.Rank {
	var out []ranks.Rank
	for r := range n {
		if r/8 < len(b) && b[r/8]&(1<<(r%8)) != 0 {
			out = append(out, ranks.Rank(r))
		}
	}
	return out
}

// emit carries out the outputs of one step of p, crashing p part-way if it
// is a victim whose trigger fires in this step.
func (s *sim) emit(p ranks.Rank, outs []Out) {
	s.steps[p]++
	cut, crash := len(outs), false
	if v := s.victimOf[p]; v != nil {
		if v.onStep >= 0 && s.steps[p] == v.onStep {
			cut, crash = s.rng.IntN(len(outs)+1), true
		}
		if v.onDecide >= 0 {
			for i, o := range outs {
				if o.Decided != nil && o.Decided.ID == s.ids[v.onDecide] {
					cut, crash = i+1+s.rng.IntN(len(outs)-i), true
				}
			}
		}
	}
	for _, o := range outs[:cut] {
		if o.Decided != nil {
			s.decided(p, o.Decided)
			continue
		}
		if o.To == p || int(o.To) >= s.cfg.n {
			s.fatalf("rank %d sends to %d", p, o.To)
		}
		b, err := codec.encode(nil, &o.Msg)
		if err != nil {
			s.fatalf("rank %d encodes %v: %v", p, o.Msg.Kind, err)
		}
		lat := s.rng.IntN(s.cfg.maxLatency + 1)
		if s.cfg.straggle > 0 && s.rng.IntN(s.cfg.straggle) == 0 {
			lat += s.rng.IntN(4*s.cfg.maxDetect + 1)
		}
		s.push(&simEvent{at: s.now + lat, kind: evMsg, from: p, to: o.To, msg: b})
	}
	if st := s.cores[p].Stats(); st.Records > s.maxRecords {
		s.maxRecords = st.Records
	}
	if crash {
		s.crash(p)
	}
}

func (s *sim) crash(p ranks.Rank) {
	if !s.alive[p] {
		return
	}
	s.alive[p] = false
	s.died[p] = s.now
	if s.cfg.dropInflight {
		drop := func(e *simEvent) {
			if e.kind == evMsg && e.from == p && s.rng.IntN(2) == 0 {
				e.dropped = true
			}
		}
		for _, e := range s.ready {
			drop(e)
		}
		for _, e := range s.future {
			drop(e)
		}
	}
	for q := range s.cfg.n {
		if ranks.Rank(q) != p && s.alive[q] {
			s.push(&simEvent{at: s.now + 1 + s.rng.IntN(s.cfg.maxDetect+1), kind: evDetect, from: p, to: ranks.Rank(q)})
		}
	}
}

// decided records a decision and checks what can be checked at once.
func (s *sim) decided(p ranks.Rank, d *Decision) {
	k := slices.Index(s.ids, d.ID)
	if k < 0 {
		s.fatalf("rank %d decides unknown %v", p, d.ID)
	}
	if old := s.decOf[p][d.ID]; old != nil {
		s.fatalf("irrevocability: rank %d decides %v twice (at %d and %d)", p, d.ID, old.at, s.now)
	}
	if _, ok := s.started[p][k]; !ok {
		s.fatalf("rank %d decides %v without starting it", p, d.ID)
	}
	rec := &decRec{p: p, at: s.now, value: bytes.Clone(d.Value), dead: d.Dead.Clone(), unacked: d.Unacked}
	n := s.cfg.n
	// Accuracy: only crashed ranks are decided dead.
	for _, r := range d.Dead.Members() {
		if s.alive[r] {
			s.fatalf("rank %d decides %v with alive rank %d dead (%v)", p, d.ID, r, d.Dead)
		}
	}
	// Participation: C ⊆ starters, every process alive now is in C, every
	// rank outside C is in Dead.
	C := bitsOf(d.Value, n)
	inC := make([]bool, n)
	for _, r := range C {
		inC[r] = true
		if _, ok := s.started[r][k]; !ok {
			s.fatalf("rank %d decides %v including rank %d that never started it", p, d.ID, r)
		}
	}
	for r := range n {
		if s.alive[r] && !inC[r] {
			s.fatalf("participation: rank %d decides %v = %v without alive rank %d", p, d.ID, C, r)
		}
		if !inC[r] && !d.Dead.Has(ranks.Rank(r)) {
			s.fatalf("rank %d decides %v: rank %d neither contributed (%v) nor is dead (%v)", p, d.ID, r, C, d.Dead)
		}
	}
	// The flag: Dead ⊄ ∩_{c ∈ C} Acked_c.
	var acked ranks.Set
	for i, r := range C {
		a := s.started[r][k].acked
		if i == 0 {
			acked = a.Clone()
		} else {
			acked = intersect(acked, &a)
		}
	}
	if want := !subset(&d.Dead, &acked); want != d.Unacked {
		s.fatalf("rank %d decides %v with Unacked %v, want %v (dead %v, ∩acked %v)", p, d.ID, d.Unacked, want, d.Dead, acked)
	}
	// Agreement (Theorem 2): every earlier decider still alive decided the
	// same. Earlier deciders now dead may differ only in the non-uniform
	// case of the paper's footnote 1.
	for _, o := range s.decs[d.ID] {
		if sameDecision(o, rec) {
			continue
		}
		if s.alive[o.p] {
			s.fatalf("agreement: rank %d decides %v = %v dead %v at %d, alive rank %d decided %v dead %v at %d",
				p, d.ID, bitsOf(rec.value, n), rec.dead, s.now, o.p, bitsOf(o.value, n), o.dead, o.at)
		}
		s.nonUniform++
	}
	s.decs[d.ID] = append(s.decs[d.ID], rec)
	s.decOf[p][d.ID] = rec
	if s.cfg.sequential && k+1 < s.cfg.agreements {
		s.push(&simEvent{at: s.now + s.rng.IntN(s.cfg.maxStartGap+1), kind: evStart, to: p, k: k + 1})
	}
}

func sameDecision(a, b *decRec) bool {
	return bytes.Equal(a.value, b.value) && a.dead.Equal(b.dead) && a.unacked == b.unacked
}

// check verifies termination and irrevocability at quiescence.
func (s *sim) check() {
	alive := 0
	for p := range s.cfg.n {
		if !s.alive[p] {
			continue
		}
		alive++
		for k, id := range s.ids {
			rec := s.decOf[p][id]
			if rec == nil {
				s.fatalf("termination: alive rank %d never decided %v (agreement %d, started %v)", p, id, k, s.started[p])
			}
			if v, dead, un, ok := s.cores[p].Decision(id); ok {
				if !bytes.Equal(v, rec.value) || !dead.Equal(rec.dead) || un != rec.unacked {
					s.fatalf("irrevocability: rank %d reports %v differently later", p, id)
				}
			} else if k == len(s.ids)-1 {
				s.fatalf("rank %d forgot its last decision %v", p, id)
			}
		}
	}
	if alive == 0 {
		s.fatalf("no survivor (bad scenario)")
	}
}
