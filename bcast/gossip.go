package bcast

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/vigil-hpc/vigil/ranks"
)

// GossipConfig configures a corrected gossip (seed 002) or a corrected
// tree. Times are nanoseconds.
type GossipConfig struct {
	// Alg is the correction: OCG, CCG or FCG, or GOS for none (plain
	// gossip, seed 002's baseline: a g-node delivers when reached and
	// stops at T; weakly consistent).
	Alg GossipAlg
	// Tree disseminates along the greedy LogP tree (GreedyTree) instead of
	// random gossip: the corrected tree, with Alg's correction and so
	// Alg's guarantee.
	Tree bool
	// BinomialTree, with Tree, disseminates along the binomial tree
	// (BinomialTree) instead: the simulator's control for the greedy
	// tree.
	BinomialTree bool
	// Step is o, the time of one step: a rank sends at most one
	// dissemination and one correction message per step.
	Step int64
	// Latency is L, the expected one-way message latency: a message sent
	// in step s is taken to arrive in step s + ℓ + 1, ℓ = ⌈L/o⌉.
	Latency int64
	// T: the dissemination sends in steps before T (0: seed 002's
	// equations (3)–(5) for the participants, or the tree's span).
	T int
	// C is OCG's number of correction messages per g-node (0: equation
	// (3)'s).
	C int
	// F is the number of failures FCG tolerates during the correction,
	// 1..MaxF (0: 1).
	F int
	// Seed seeds the random gossip targets (mixed with the rank).
	Seed uint64
}

// Validate reports the first bad field: an out-of-bounds Step, Latency,
// T, C or F as a *FieldError, so that front ends can name the setting as
// their users know it.
func (c *GossipConfig) Validate() error {
	switch {
	case c.Alg > FCG:
		return fmt.Errorf("bcast: GossipConfig.Alg = %v, want GOS, OCG, CCG or FCG", c.Alg)
	case c.BinomialTree && !c.Tree:
		return fmt.Errorf("bcast: GossipConfig.BinomialTree without Tree")
	case c.Step <= 0:
		return &FieldError{Field: "Step", Value: c.Step, Want: "> 0"}
	case c.Latency < 0:
		return &FieldError{Field: "Latency", Value: c.Latency, Want: "≥ 0"}
	case c.Latency/c.Step > MaxSteps:
		return &FieldError{Field: "Latency", Value: c.Latency, Want: fmt.Sprintf("at most %d steps of %%s = %d ns", MaxSteps, c.Step), Other: "Step"}
	case c.T < 0 || c.T > MaxT:
		return &FieldError{Field: "T", Value: int64(c.T), Want: fmt.Sprintf("0 (planned) to %d", MaxT)}
	case c.C < 0 || c.C > MaxT:
		return &FieldError{Field: "C", Value: int64(c.C), Want: fmt.Sprintf("0 (planned) to %d", MaxT)}
	case c.F < 0 || c.F > MaxF:
		return &FieldError{Field: "F", Value: int64(c.F), Want: fmt.Sprintf("1 to %d (0: 1)", MaxF)}
	}
	return nil
}

// Bounds of GossipConfig: Latency spans at most MaxSteps steps, T and C
// are at most MaxT.
const (
	MaxSteps = 1 << 16
	MaxT     = 1 << 20
)

// FieldError is a GossipConfig field out of its bounds.
type FieldError struct {
	// Field is the field's name ("F"), Value its value (nanoseconds for
	// Step and Latency).
	Field string
	Value int64
	// Want is the bound; where it has %s, the field Other is written there.
	Want, Other string
}

// Error implements error.
func (e *FieldError) Error() string {
	want := e.Want
	if e.Other != "" {
		want = fmt.Sprintf(want, "GossipConfig."+e.Other)
	}
	return fmt.Sprintf("bcast: GossipConfig.%s = %d: want %s", e.Field, e.Value, want)
}

// Ell returns ℓ = ⌈Latency/Step⌉.
func (c *GossipConfig) Ell() int { return int((c.Latency + c.Step - 1) / c.Step) }

// Gossip is one rank's corrected gossip (seed 002 Algorithms 1–3; plain
// gossip with GOS) or corrected tree, a Propagator. A broadcast's participants
// A = {0..n-1} \ D are labelled from the source as for the overlays
// (label 0) and form the correction's ring. Each rank keeps a step clock
// per broadcast: step s is at origin + s·o, the origin set from the first
// message's Hop.Step (sent in step s, it arrives in step s + ℓ + 1).
//
//   - Dissemination: a rank first reached by a PhaseGossip message in step
//     τ is a g-node; in every step τ < s < T it sends one message to a
//     uniformly random other participant, or, with Tree, to its next child
//     in the greedy tree.
//   - Correction, from step T + ℓ + 1: every g-node runs CorrNode (the
//     ring messages of OCG, CCG or FCG, SOS included); a rank first
//     reached by a correction message is a c-node.
//   - Delivery: a g-node of OCG and CCG delivers when reached, a c-node on
//     its first correction message; under FCG a g-node delivers when its
//     correction is done, a c-node once it knows f+1 g-nodes (or after
//     its SOS), as the paper's Algorithm 3 does.
//
// Guarantees, as seed 002 states them: OCG is weakly consistent (every
// participant is reached with the probability the plan's δ gives); CCG
// reaches every live participant if none fails during the correction;
// FCG if at most F fail during the correction (else SOS floods). The
// dissemination tolerates any failures: it only makes fewer g-nodes.
// Without failures, correctness does not depend on the clocks: a rank
// that starts its correction early or late only sends more.
type Gossip struct {
	self  ranks.Rank
	n     int
	cfg   GossipConfig
	ell   int32
	rng   *rand.Rand
	seq   uint64
	seen  seenIDs
	live  map[ID]*gstate
	plans map[int]*gplan // by number of participants
	// jobT and jobC are T and OCG's C for the whole job (GossipConfig's,
	// or planned).
	jobT, jobC int
	done       Done // the last broadcast retired
}

// Done is a broadcast a rank is done with, in seed 002's terms, in steps
// of its clock (CorrNode's Tau and Exit): Delivered is when the algorithm
// delivers it (an FCG g-node's delivery is dated at its last step with
// work, one step before Gossip hands it over, when it finds the
// correction done), Exit when the rank is done sending. Simulators read it
// to measure seed 002's latency.
type Done struct {
	ID              ID
	Delivered, Exit int32
}

// gplan is the parameters for m participants.
type gplan struct {
	T     int32 // the dissemination sends before T
	start int32 // the correction starts: T + ℓ + 1
	p     CorrParams
	tree  tree
}

// tree is a dissemination tree over labels 0..m−1 rooted at 0: a node
// reached in step τ sends to its i-th child in step τ+1+i, and no node
// sends from step Span on in a failure-free run.
type tree interface {
	Children(x int) []int
	Span() int
}

// gstate is one broadcast in progress at this rank.
type gstate struct {
	msg       Message // the content, without Hop
	l         labelling
	x         uint32 // self's label
	plan      *gplan
	origin    int64 // local time of step 0
	last      int32 // last step taken
	g         bool  // a g-node
	kids      []int // tree children's labels
	corr      bool  // the g-node's correction began
	stepping  bool  // node takes correction steps
	from      int32 // first correction step of a node that joined
	node      CorrNode
	delivered bool
}

// NewGossip returns the state machine of rank self in a job of n ranks.
func NewGossip(self ranks.Rank, n int, cfg GossipConfig) (*Gossip, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.F == 0 {
		cfg.F = 1
	}
	g := &Gossip{self: self, n: n, cfg: cfg, ell: int32(cfg.Ell()),
		rng:  rand.New(rand.NewPCG(cfg.Seed, uint64(self)+0x9e3779b97f4a7c15)),
		seen: seenIDs{}, live: map[ID]*gstate{}, plans: map[int]*gplan{},
		jobT: cfg.T, jobC: cfg.C}
	if g.jobT == 0 && !cfg.Tree || g.jobC == 0 && cfg.Alg == OCG {
		plan := jobPlan(cfg.Alg, n, cfg.Ell(), cfg.F)
		if g.jobT == 0 {
			g.jobT = max(plan.T, 1)
		}
		if g.jobC == 0 {
			g.jobC = max(plan.C, 1)
		}
	}
	g.jobC = max(g.jobC, 1)
	return g, nil
}

// Name returns "gos", "ocg", "ccg", "fcg", or "ctree" for the greedy
// tree with FCG ("ctree-ocg", "btree-fcg" and so on for the others).
func (g *Gossip) Name() string {
	alg := map[GossipAlg]string{GOS: "gos", OCG: "ocg", CCG: "ccg", FCG: "fcg"}[g.cfg.Alg]
	switch {
	case !g.cfg.Tree:
		return alg
	case g.cfg.BinomialTree:
		return "btree-" + alg
	case g.cfg.Alg == FCG:
		return "ctree"
	}
	return "ctree-" + alg
}

// Plan returns the dissemination's end T, OCG's C and the hop ℓ used for
// a broadcast among m participants.
func (g *Gossip) Plan(m int) (T, C, ell int) {
	p := g.plan(m)
	return int(p.T), p.p.C, int(g.ell)
}

// plan returns (and caches) the parameters for m participants: the
// dissemination's T and OCG's C planned once for the whole job (jobPlan),
// which is conservative for fewer participants (more gossip per
// participant), the correction's ring and the tree over the m.
func (g *Gossip) plan(m int) *gplan {
	if p := g.plans[m]; p != nil {
		return p
	}
	T, C := g.jobT, g.jobC
	p := &gplan{p: CorrParams{Alg: g.cfg.Alg, N: int32(m), C: C, F: g.cfg.F, Timeout: DefaultTimeout(m, int(g.ell))}}
	if g.cfg.Tree {
		if g.cfg.BinomialTree {
			p.tree = NewBinomialTree(m, int(g.ell))
		} else {
			p.tree = NewGreedyTree(m, int(g.ell))
		}
		if g.cfg.T == 0 {
			T = p.tree.Span()
		}
	}
	p.T, p.start = int32(T), int32(T)+g.ell+1
	if len(g.plans) > 64 {
		clear(g.plans)
	}
	g.plans[m] = p
	return p
}

// planKey identifies a job's plan.
type planKey struct {
	alg       GossipAlg
	n, ell, f int
}

// jobPlans memoises jobPlan across the Gossips of one process (an
// in-memory cluster, a simulator): the equations cost milliseconds at
// n = 1,024 and 0.1 s at n = 65,536.
var jobPlans struct {
	sync.Mutex
	m map[planKey]GossipPlan
}

// jobPlan returns seed 002's plan (equations (3)–(5), δ =
// DeltaConsistency) for n participants.
func jobPlan(alg GossipAlg, n, ell, f int) GossipPlan {
	k := planKey{alg, n, ell, f}
	jobPlans.Lock()
	defer jobPlans.Unlock()
	if p, ok := jobPlans.m[k]; ok {
		return p
	}
	var plan GossipPlan
	if n >= 2 {
		model := GossipModel{N: n, Nactive: n, Ell: ell}
		switch alg {
		case GOS:
			plan = model.PlanGOS(DeltaConsistency)
		case OCG:
			plan = model.PlanOCG(DeltaConsistency)
		case CCG:
			plan = model.PlanCCG(DeltaConsistency)
		default:
			plan = model.PlanFCG(f, DeltaConsistency)
		}
	}
	if jobPlans.m == nil || len(jobPlans.m) > 256 {
		jobPlans.m = map[planKey]GossipPlan{}
	}
	jobPlans.m[k] = plan
	return plan
}

// Begin starts broadcasting msg from self: self is the root, label 0, a
// g-node reached in step 0, which the caller delivers at once.
func (g *Gossip) Begin(now int64, msg Message) (Message, []Send) {
	g.seq++
	m := Message{ID: ID{Source: g.self, Seq: g.seq}, Kind: msg.Kind, Dead: append([]ranks.Rank(nil), msg.Dead...),
		D: msg.D.Clone(), Detector: g.self, DetectedAt: msg.DetectedAt, Payload: msg.Payload}
	g.seen.mark(m.ID)
	b := g.newState(m, now, 0)
	if b == nil {
		return m, nil
	}
	b.reached(0)
	b.delivered = true // by the caller
	var out Out
	g.advance(b, now, &out)
	g.retire(b)
	return m, out.Sends
}

// newState returns the state of broadcast m at this rank, whose step clock
// reads step at now; nil if self is not a participant.
func (g *Gossip) newState(m Message, now int64, step int32) *gstate {
	m.Hop = Hop{}
	l, x, ok := newLabelling(g.self, m.ID.Source, g.n, &m.D)
	if !ok {
		return nil
	}
	b := &gstate{msg: m, l: l, x: uint32(x), plan: g.plan(l.m), origin: now - int64(step)*g.cfg.Step, last: step}
	b.l.D = &b.msg.D
	b.node.Reset()
	g.live[m.ID] = b
	return b
}

// reached makes b a g-node reached in step tau.
func (b *gstate) reached(tau int32) {
	b.g = true
	b.node.Reached(tau)
	if t := b.plan.tree; t != nil {
		b.kids = t.Children(int(b.x))
	}
}

// Step handles m from rank from: the first message of a broadcast sets
// this rank's step clock; a gossip message makes it a g-node, a correction
// message is stepped into the correction (CorrNode.Receive).
func (g *Gossip) Step(now int64, from ranks.Rank, m Message, localDead *ranks.Set, out *Out) error {
	if int64(g.self) >= int64(g.n) {
		return errorf("self", "rank %d, want < n = %d", g.self, g.n)
	}
	if err := m.Validate(g.n); err != nil {
		return err
	}
	if m.Hop.Phase == PhaseNone {
		return errorf("Hop.Phase", "an overlay's message to a %s rank", g.Name())
	}
	if m.Hop.Phase != PhaseGossip { // a correction message names participants
		if _, ok := m.D.AliveLabel(from, g.n); !ok {
			return errorf("from", "rank %d is not a participant of broadcast %v", from, m.ID)
		}
		for i, r := range m.Hop.Known {
			if m.D.Has(r) {
				return errorf(fmt.Sprintf("Hop.Known[%d]", i), "rank %d is not a participant of broadcast %v", r, m.ID)
			}
		}
	}
	b := g.live[m.ID]
	if b == nil {
		if !g.seen.mark(m.ID) {
			return nil // done with it here
		}
		arrive := int32(min(int64(m.Hop.Step)+int64(g.ell)+1, Never-1))
		if b = g.newState(m, now, arrive); b == nil { // not a participant
			m.Hop = Hop{}
			out.Deliver = append(out.Deliver, m)
			return nil
		}
	}
	sends := len(out.Sends)
	g.advance(b, now, out)
	cur := b.last
	switch m.Hop.Phase {
	case PhaseGossip:
		if b.node.State == StateNone {
			b.reached(cur)
		}
	default:
		fromLabel, _ := b.labelOf(from) // checked above
		cm := CorrMsg{From: fromLabel, Kind: CorrKind(m.Hop.Phase - PhaseFwd)}
		for _, r := range m.Hop.Known {
			cm.List[cm.N], _ = b.labelOf(r)
			cm.N++
		}
		if joined, _ := b.node.Receive(&b.plan.p, b.x, &cm, cur); joined {
			b.stepping, b.from = true, cur+1
		}
	}
	g.deliver(b, out)
	g.filter(out, sends, localDead)
	g.retire(b)
	return nil
}

// labelOf returns r's label in b's labelling.
func (b *gstate) labelOf(r ranks.Rank) (uint32, bool) {
	i, ok := b.l.D.AliveLabel(r, b.l.n)
	if !ok {
		return 0, false
	}
	return uint32(b.l.label(i)), true
}

// Tick takes every step due by now in every broadcast in progress;
// nothing is sent to the ranks of localDead (may be nil).
func (g *Gossip) Tick(now int64, localDead *ranks.Set, out *Out) {
	sends := len(out.Sends)
	for _, b := range g.live {
		g.advance(b, now, out)
		g.deliver(b, out)
		g.retire(b)
	}
	g.filter(out, sends, localDead)
}

// Next returns when the earliest broadcast in progress has a step with
// work to do.
func (g *Gossip) Next() int64 {
	var next int64
	for _, b := range g.live {
		if s := b.nextWork(); s < Never {
			if t := b.origin + int64(s)*g.cfg.Step; next == 0 || t < next {
				next = t
			}
		}
	}
	return next
}

// nextWork returns the next step in which b may send or decide, Never if
// none.
func (b *gstate) nextWork() int32 {
	s := b.last + 1
	T := b.plan.T
	if b.g && s < T && (b.plan.tree == nil || int(s-b.node.Tau-1) < len(b.kids)) {
		return s
	}
	if b.g && !b.corr && b.plan.p.Alg != GOS {
		return max(s, b.plan.start)
	}
	if b.stepping {
		if w := b.node.WaitUntil(); w > 0 {
			return max(s, b.from, w)
		}
		return max(s, b.from)
	}
	return Never
}

// advance takes b's steps up to now's.
func (g *Gossip) advance(b *gstate, now int64, out *Out) {
	cur := int32(min((now-b.origin)/g.cfg.Step, Never-1))
	for {
		s := b.nextWork() // the steps before it would do nothing
		if s > cur {
			break
		}
		g.takeStep(b, s, out)
		b.last = s
	}
	b.last = max(b.last, cur)
}

// takeStep is b's step s: a dissemination send while s < T, then the
// correction's.
func (g *Gossip) takeStep(b *gstate, s int32, out *Out) {
	m := b.l.m
	if b.g && s > b.node.Tau && s < b.plan.T && m > 1 {
		y := -1
		if b.plan.tree != nil {
			if i := int(s - b.node.Tau - 1); i < len(b.kids) {
				y = b.kids[i]
			}
		} else {
			y = g.rng.IntN(m - 1)
			if y >= int(b.x) {
				y++
			}
		}
		if y >= 0 {
			g.send(b, out, uint32(y), Hop{Phase: PhaseGossip, Step: uint32(s)})
		}
	}
	if b.g && !b.corr && s >= b.plan.start && b.plan.p.Alg != GOS {
		b.corr, b.stepping, b.from = true, true, s
		b.node.BeginCorrection()
	}
	if b.stepping && s >= b.from {
		active, _ := b.node.Step(&b.plan.p, b.x, s, func(to uint32, kind CorrKind, list []uint32) {
			h := Hop{Phase: PhaseFwd + Phase(kind), Step: uint32(s)}
			for _, y := range list {
				h.Known = append(h.Known, b.l.rank(int(y)))
			}
			g.send(b, out, to, h)
		})
		b.stepping = active
	}
	g.deliver(b, out)
}

// send queues b's message with hop h for the rank of label to.
func (g *Gossip) send(b *gstate, out *Out, to uint32, h Hop) {
	m := b.msg
	m.Hop = h
	out.Sends = append(out.Sends, Send{To: []ranks.Rank{b.l.rank(int(to))}, Msg: m})
}

// deliver delivers b once its rule says so (see Gossip).
func (g *Gossip) deliver(b *gstate, out *Out) {
	if b.delivered {
		return
	}
	if b.node.State == StateDone || (b.g && g.cfg.Alg != FCG) {
		b.delivered = true
		out.Deliver = append(out.Deliver, b.msg)
	}
}

// retire forgets b once it has nothing left to do.
func (g *Gossip) retire(b *gstate) {
	if b.delivered && b.nextWork() == Never {
		d := Done{ID: b.msg.ID, Delivered: b.node.Tau, Exit: b.node.Exit}
		if b.node.State != StateDone { // a GOS g-node: done when the gossip stops
			d.Exit = max(d.Delivered, b.plan.T-1)
		}
		g.done = d
		delete(g.live, b.msg.ID)
	}
}

// LastDone returns the broadcast this rank retired last (ok is false if
// none did).
func (g *Gossip) LastDone() (d Done, ok bool) { return g.done, g.done.ID != ID{} }

// filter drops the sends to ranks in localDead among out.Sends[from:].
func (g *Gossip) filter(out *Out, from int, localDead *ranks.Set) {
	kept := out.Sends[:from]
	for _, s := range out.Sends[from:] {
		if s.To = withoutDead(s.To, localDead); len(s.To) > 0 {
			kept = append(kept, s)
		}
	}
	out.Sends = kept
}

// Pending returns how many broadcasts are in progress at this rank.
func (g *Gossip) Pending() int { return len(g.live) }
