package era

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/vigil-hpc/vigil/ranks"
)

// status is Status^a_p of ERA Part 1.
type status uint8

const (
	notContributed status = iota
	gathering
	broadcasting
)

// agreement holds the per-agreement variables of ERA Part 1 for one
// agreement a at this process p.
type agreement struct {
	id      ID
	tree    Tree // fixed at Start; nil before
	started bool
	// origRoot: p is the root of tree when nobody is dead (the "original
	// root" of ERA Part 4).
	origRoot bool

	status      status    // Status^a_p
	current     value     // Current^a_p
	contributed ranks.Set // Contributed^a_p
	requested   []ranks.Rank

	decided bool  // Result^a_p ≠ ⊥
	result  value // Result^a_p
	unacked bool
	down    *Msg // DOWN(a, Result^a_p), built once

	kids    []ranks.Rank // Children(S_p, p), cached for deadVer kidsVer
	kidsVer uint64

	resendAge int // Resend calls seen while open (resend.go)
}

// epochState is the garbage-collection state of one epoch (Section 4).
type epochState struct {
	collected uint64   // agreements with a smaller Seq are forgotten
	pending   []uint64 // Seqs started and not decided, increasing
	forgotten bool     // Forget was called: everything is dropped
}

// Contribution is what a process brings to an agreement (Start).
type Contribution struct {
	// Value is the process's contributed value v; it must pass Op.Check.
	Value []byte
	// Acked is the set of failures this process has acknowledged before
	// the agreement (MPI_Comm_failure_ack). The ranks are contributed to
	// the dead set too, so they must be ranks reported dead by the failure
	// detector or by an earlier decision. See Decision.Unacked.
	Acked ranks.Set
	// Tree, when not nil, replaces the core's tree for this agreement. Use
	// it for the tree rebalancing of Section 4: every process must pass the
	// same tree for the same agreement, for instance
	// base.Over(Survivors(n, previous.Dead)).
	Tree Tree
}

// Decision is a decided agreement: Result^a_p and the implicit parts.
type Decision struct {
	ID ID
	// Value is F over the contributions of a set C of processes that
	// includes every process that was alive when the root decided.
	Value []byte
	// Dead is the union of the ranks known dead by the members of C. Every
	// rank outside C is in Dead (the group of processes that failed to
	// contribute, as MPIX_COMM_AGREE returns).
	Dead ranks.Set
	// Unacked is ULFM's error flag: some rank of Dead was not in the
	// Acked set of some member of C when it called Start. Exactly: Unacked
	// iff Dead ⊄ ∩_{c ∈ C} Acked_c. With Acked = the dead set of the
	// previous decision, the first agreement after a failure raises the
	// flag at every decider and the next one does not.
	Unacked bool
}

// Survivors returns the agreed group of a shrink: 0..n-1 minus d.Dead.
func (d *Decision) Survivors(n int) []ranks.Rank { return Survivors(n, d.Dead) }

// Out is one action asked of the runtime: send Msg to To, or, when Decided
// is not nil, deliver a local decision (To is then the core's own rank).
type Out struct {
	To      ranks.Rank
	Msg     Msg
	Decided *Decision
}

// Stats are counters for tests and monitoring.
type Stats struct {
	// Records is the number of agreement records held (decided results
	// kept for late requests, and agreements in progress).
	Records int
	// Open is the number of undecided records.
	Open int
	// Dead is |S_p|, the number of ranks known dead.
	Dead int
	// Dropped counts messages ignored because they were malformed, came
	// from a rank known dead, or concerned a collected agreement.
	Dropped uint64
}

// Errors returned by Start.
var (
	ErrStarted   = errors.New("era: agreement already started")
	ErrCollected = errors.New("era: agreement below the collected range of its epoch")
)

// Core is the ERA state machine of one process p: S_p and the variables of
// any number of concurrent agreements. It does no I/O, reads no clock and
// is not safe for concurrent use: one event loop (the node runtime, a
// simulator or a test harness) calls Start, Step and Dead and carries out
// the returned Outs, in order.
type Core struct {
	self ranks.Rank
	n    int
	tree Tree
	op   Op

	dead    ranks.Set // S_p: ranks known dead
	deadVer uint64    // bumped on every change of dead

	ags    map[ID]*agreement
	open   []*agreement // undecided records, in creation order
	done   []*agreement // decided records, kept for late requests
	epochs map[uint32]*epochState

	killQ   []ranks.Rank
	killing bool

	literal literalRules // tests only
	dropped uint64
}

// literalRules switch the core back to the paper's rules as printed, to
// show in tests why they were amended.
type literalRules struct {
	rrMarksElders   bool // RESULTREQUEST from q marks only ranks < q dead
	downNeedsParent bool // a root never accepts DOWN (Parent = ⊥ ≠ q)
}

// NewCore returns the core of process self among ranks 0..n-1, using tree
// (unless a Contribution overrides it) and op. It panics if self ≥ n or
// tree or op is nil.
func NewCore(self ranks.Rank, n int, tree Tree, op Op) *Core {
	if int64(self) >= int64(n) || tree == nil || op == nil {
		panic(fmt.Sprintf("era: NewCore(%d, %d, %v, %v): bad arguments", self, n, tree, op))
	}
	return &Core{self: self, n: n, tree: tree, op: op, deadVer: 1,
		ags: map[ID]*agreement{}, epochs: map[uint32]*epochState{}}
}

// Self returns the core's rank.
func (c *Core) Self() ranks.Rank { return c.self }

// Known returns a copy of S_p, the ranks this core knows dead.
func (c *Core) Known() ranks.Set { return c.dead.Clone() }

// Stats returns the core's counters.
func (c *Core) Stats() Stats {
	return Stats{Records: len(c.ags), Open: len(c.open), Dead: c.dead.Len(), Dropped: c.dropped}
}

// Decision returns the decision of agreement id if this process has
// decided it and not collected it yet. Once ok, the answer never changes
// (irrevocability) until the record is garbage-collected.
func (c *Core) Decision(id ID) (value []byte, dead ranks.Set, unacked bool, ok bool) {
	a := c.ags[id]
	if a == nil || !a.decided {
		return nil, ranks.Set{}, false, false
	}
	return bytes.Clone(a.result.v), a.result.dead.Clone(), a.unacked, true
}

// Forget drops every record of epoch e and ignores its messages from now
// on: the end of a context, after a flushing agreement (Section 4).
func (c *Core) Forget(e uint32) {
	c.epoch(e).forgotten = true
	drop := func(a *agreement) bool {
		if a.id.Epoch == e {
			delete(c.ags, a.id)
			return true
		}
		return false
	}
	c.open = slices.DeleteFunc(c.open, drop)
	c.done = slices.DeleteFunc(c.done, drop)
}

func (c *Core) epoch(e uint32) *epochState {
	ep := c.epochs[e]
	if ep == nil {
		ep = &epochState{}
		c.epochs[e] = ep
	}
	return ep
}

// record returns the record of id, creating it (all variables at their
// initial values) unless id is collected.
func (c *Core) record(id ID) *agreement {
	if a := c.ags[id]; a != nil {
		return a
	}
	if ep := c.epochs[id.Epoch]; ep != nil && (ep.forgotten || id.Seq < ep.collected) {
		return nil
	}
	a := &agreement{id: id}
	c.ags[id] = a
	c.open = append(c.open, a)
	return a
}

// ----------------------------------------------------------------------
// Procedure Agreement

// Start is the paper's procedure Agreement(v, a): p enters gathering,
// contributes v and, through the spontaneous rule, may send its UP or
// decide at once. The decision arrives later as an Out with Decided set;
// this is where the process may return early. Its contribution also holds
// S_p ∪ Acked, Acked, and the lowest Seq of the epoch it has started and
// not decided (the collection bound of Section 4).
func (c *Core) Start(id ID, ct Contribution) ([]Out, error) {
	if err := c.op.Check(ct.Value); err != nil {
		return nil, fmt.Errorf("era: start %v: %w", id, err)
	}
	if !c.ranksOK(&ct.Acked) {
		return nil, fmt.Errorf("era: start %v: acked rank ≥ n = %d", id, c.n)
	}
	t := ct.Tree
	if t == nil {
		t = c.tree
	}
	if m, ok := t.(interface{ Contains(ranks.Rank) bool }); ok && !m.Contains(c.self) {
		return nil, fmt.Errorf("era: start %v: rank %d is not a member of tree %v", id, c.self, t)
	}
	ep := c.epoch(id.Epoch)
	a := c.ags[id]
	if a == nil {
		if ep.forgotten || id.Seq < ep.collected {
			return nil, fmt.Errorf("%w: %v", ErrCollected, id)
		}
		a = c.record(id)
	} else if a.started {
		return nil, fmt.Errorf("%w: %v", ErrStarted, id)
	}
	a.started = true
	a.tree = t
	_, hasParent := t.Parent(c.self, nil)
	a.origRoot = !hasParent
	a.status = gathering
	i, _ := slices.BinarySearch(ep.pending, id.Seq)
	ep.pending = slices.Insert(ep.pending, i, id.Seq)

	own := value{ok: true, v: ct.Value, dead: c.dead.Clone(), acked: ct.Acked, collect: ep.pending[0]}
	own.dead.AddAll(ct.Acked)
	merge(c.op, &a.current, &own)
	if a.contributed.Len() == 0 {
		// Room for the children's UPs, which usually all come.
		a.contributed, _ = ranks.FromSorted(make([]ranks.Rank, 0, len(c.children(a))+1))
	}
	a.contributed.Add(c.self)
	return c.spontaneous(a, nil), nil
}

// ----------------------------------------------------------------------
// Procedure Decision

// decide is Decision(v, a): remember v as Result and send it to
// Children(S_p, p) ∪ RequestedResult. v must not be shared.
func (c *Core) decide(a *agreement, v value, out []Out) []Out {
	a.decided = true
	a.status = broadcasting
	a.result = v
	a.unacked = !subset(&v.dead, &v.acked)
	if i := slices.Index(c.open, a); i >= 0 {
		c.open = slices.Delete(c.open, i, i+1)
	}
	c.done = append(c.done, a)
	if ep := c.epochs[a.id.Epoch]; ep != nil {
		if i, ok := slices.BinarySearch(ep.pending, a.id.Seq); ok {
			ep.pending = slices.Delete(ep.pending, i, i+1)
		}
	}
	out = append(out, Out{To: c.self, Decided: &Decision{ID: a.id, Value: bytes.Clone(v.v), Dead: v.dead.Clone(), Unacked: a.unacked}})

	down := c.downMsg(a)
	kids := c.children(a)
	out = slices.Grow(out, len(kids)+len(a.requested))
	for _, k := range kids {
		out = append(out, Out{To: k, Msg: *down})
	}
	for _, r := range a.requested {
		if r != c.self && !slices.Contains(kids, r) && !c.dead.Has(r) {
			out = append(out, Out{To: r, Msg: *down})
		}
	}
	// RequestedResult ← ∅; the working variables are of no further use.
	a.requested, a.current, a.contributed, a.kids, a.kidsVer = nil, value{}, ranks.Set{}, nil, 0

	// The decided dead set is knowledge of real failures: adopt it (this
	// runs ERA Part 4 for the other agreements).
	for _, r := range v.dead.Members() {
		if !c.dead.Has(r) {
			out = c.kill(r, out)
		}
	}
	c.collect(a.id.Epoch, v.collect)
	return out
}

func (c *Core) downMsg(a *agreement) *Msg {
	if a.down == nil {
		a.down = &Msg{Kind: Down, ID: a.id, Value: a.result.v, Dead: a.result.dead, Acked: a.result.acked, Collect: a.result.collect}
	}
	return a.down
}

func (c *Core) upMsg(a *agreement, to ranks.Rank) Out {
	a.current.dead.AddAll(c.dead) // the contribution carries what p knows dead
	cur := a.current.clone()
	return Out{To: to, Msg: Msg{Kind: Up, ID: a.id, Value: cur.v, Dead: cur.dead, Acked: cur.acked, Collect: cur.collect}}
}

// collect applies an agreed collection bound (Section 4, Garbage
// Collection): every alive process has decided the agreements of the epoch
// below g, so nobody will ask for their results again.
func (c *Core) collect(e uint32, g uint64) {
	ep := c.epochs[e]
	if ep == nil || g <= ep.collected {
		return
	}
	ep.collected = g
	drop := func(a *agreement) bool {
		if a.id.Epoch == e && a.id.Seq < g && (a.decided || !a.started) {
			delete(c.ags, a.id)
			return true
		}
		return false
	}
	c.done = slices.DeleteFunc(c.done, drop)
	c.open = slices.DeleteFunc(c.open, drop)
}

// ----------------------------------------------------------------------
// ERA Part 3: the spontaneous rule

// spontaneous fires when Status = gathering and Children(S_p, p) ∪ {p} ⊆
// Contributed (the deciding condition DC): the root decides, any other
// process sends its UP to its parent; both enter broadcasting.
func (c *Core) spontaneous(a *agreement, out []Out) []Out {
	if a.decided || a.status != gathering || !a.contributed.Has(c.self) {
		return out
	}
	for _, k := range c.children(a) {
		if !a.contributed.Has(k) {
			return out
		}
	}
	a.status = broadcasting
	if p, ok := a.tree.Parent(c.self, &c.dead); ok {
		return append(out, c.upMsg(a, p))
	}
	a.current.dead.AddAll(c.dead)
	v := a.current
	a.current = value{}
	return c.decide(a, v, out)
}

// ----------------------------------------------------------------------
// ERA Part 2: rules when a message is received

// Step handles one message from rank from (ERA Part 2) and returns what to
// send and decide. Malformed messages, messages from ranks known dead and
// messages for collected agreements are dropped (counted in Stats).
func (c *Core) Step(from ranks.Rank, m Msg) []Out {
	if int64(from) >= int64(c.n) || from == c.self || c.dead.Has(from) || !c.valid(&m) {
		c.dropped++
		return nil
	}
	switch m.Kind {
	case Up:
		return c.recvUp(from, &m)
	case Down:
		return c.recvDown(from, &m)
	default:
		return c.recvRequest(from, &m)
	}
}

func (c *Core) valid(m *Msg) bool {
	switch m.Kind {
	case Up, Down:
		return c.op.Check(m.Value) == nil && c.ranksOK(&m.Dead) && subset(&m.Acked, &m.Dead)
	case ResultRequest:
		return c.ranksOK(&m.Dead)
	}
	return false
}

func (c *Core) ranksOK(s *ranks.Set) bool {
	ms := s.Members()
	return len(ms) == 0 || int64(ms[len(ms)-1]) < int64(c.n)
}

// recvUp is Rule Recv(UP(a, v)) from q. Amended: a process that cannot
// fold the UP in (it is broadcasting) and is not yet decided remembers q in
// RequestedResult, as the paper's prose says ("it waits for the decision to
// be made, which will trigger the answer to the requesting child"); so does
// a gathering process for a sender that is not its child in its current
// view (q knows a death p does not), so that q gets the DOWN.
func (c *Core) recvUp(q ranks.Rank, m *Msg) []Out {
	a := c.record(m.ID)
	if a == nil {
		c.dropped++
		return nil
	}
	if a.decided {
		return []Out{{To: q, Msg: *c.downMsg(a)}}
	}
	if a.status != broadcasting {
		v := value{ok: true, v: m.Value, dead: m.Dead, acked: m.Acked, collect: m.Collect}
		merge(c.op, &a.current, &v)
		a.contributed.Add(q)
	}
	if !c.isChild(a, q) && !slices.Contains(a.requested, q) {
		a.requested = append(a.requested, q)
	}
	return c.spontaneous(a, nil)
}

// recvDown is Rule Recv(DOWN(a, v)) from q: decide v if q is the parent.
// Amended: a root (Parent = ⊥) accepts a DOWN from anyone. A root only
// receives DOWN messages in answer to its RESULTREQUESTs, whose purpose is
// to learn an earlier decision; the printed guard q = Parent(S_p, p) would
// make it wait forever for an UP that a decided child never sends.
func (c *Core) recvDown(q ranks.Rank, m *Msg) []Out {
	a := c.ags[m.ID]
	if a == nil || a.decided || a.tree == nil {
		return nil
	}
	p, ok := a.tree.Parent(c.self, &c.dead)
	if (ok && p == q) || (!ok && !c.literal.downNeedsParent) {
		v := value{ok: true, v: m.Value, dead: m.Dead, acked: m.Acked, collect: m.Collect}
		return c.decide(a, v.clone(), nil)
	}
	return nil
}

// recvRequest is Rule Recv(RESULTREQUEST(a)) from q. The paper marks every
// r < q dead: q is a root, so all its elders are dead. Amended: p adopts
// the whole dead set S_q carried by the request, which contains those
// elders and also the dead nodes between q and p. Without them an in-flight
// DOWN from a dead former parent of p could still be accepted after p
// answered q, and p would decide a value q never learns
// (TestLiteralRequestRuleDisagrees).
func (c *Core) recvRequest(q ranks.Rank, m *Msg) []Out {
	var out []Out
	if c.literal.rrMarksElders {
		out = c.killElders(m.ID, q, out)
	} else {
		for _, r := range m.Dead.Members() {
			out = c.kill(r, out)
		}
	}
	a := c.record(m.ID)
	if a == nil {
		c.dropped++
		return out
	}
	switch {
	case a.decided:
		out = append(out, Out{To: q, Msg: *c.downMsg(a)})
	case a.status == broadcasting:
		// Part 4 may just have sent the same UP to q, its new parent.
		for _, o := range out {
			if o.Decided == nil && o.To == q && o.Msg.Kind == Up && o.Msg.ID == a.id {
				return out
			}
		}
		out = append(out, c.upMsg(a, q))
	default:
		if !slices.Contains(a.requested, q) {
			a.requested = append(a.requested, q)
		}
	}
	return out
}

// killElders is the printed rule "∀ r < q: S_p[r] ← dead", with < the
// tree's label order (the rank order for flat trees over 0..n-1).
func (c *Core) killElders(id ID, q ranks.Rank, out []Out) []Out {
	t := c.tree
	if a := c.ags[id]; a != nil && a.tree != nil {
		t = a.tree
	}
	h, ok := t.(*HeapTree)
	if !ok {
		return out
	}
	if lq, ok := h.label(q); ok {
		for l := range lq {
			out = c.kill(h.rank(l), out)
		}
	}
	return out
}

func (c *Core) isChild(a *agreement, q ranks.Rank) bool {
	if a.tree == nil {
		return false
	}
	p, ok := a.tree.Parent(q, &c.dead)
	return ok && p == c.self
}

func (c *Core) children(a *agreement) []ranks.Rank {
	if a.kidsVer != c.deadVer {
		a.kids = a.tree.Children(c.self, &c.dead)
		a.kidsVer = c.deadVer
	}
	return a.kids
}

// ----------------------------------------------------------------------
// ERA Part 4: rule when a process is discovered dead

// Dead tells the core that the failure detector found r dead (ERA Part 4).
// The detector must be perfect: only dead ranks are reported. Reports of
// known ranks, of the core's own rank or of ranks ≥ n are ignored.
func (c *Core) Dead(r ranks.Rank) []Out { return c.kill(r, nil) }

// kill queues r and, unless already inside Part 4, runs it for every
// queued rank (deciding may teach more deaths).
func (c *Core) kill(r ranks.Rank, out []Out) []Out {
	c.killQ = append(c.killQ, r)
	if c.killing {
		return out
	}
	c.killing = true
	for i := 0; i < len(c.killQ); i++ {
		out = c.discover(c.killQ[i], out)
	}
	c.killQ = c.killQ[:0]
	c.killing = false
	return out
}

// discover is Rule "process q is discovered dead". With S'_p the old S_p:
//   - for every agreement where p is broadcasting, undecided, and q was
//     Parent(S'_p, p): if p is now root it re-enters gathering with
//     Contributed = {p} and sends RESULTREQUEST to its children, else it
//     sends its UP again to its new parent;
//   - for every agreement where p is a gathering root that is not the
//     original root and q was one of its children: RESULTREQUEST to the
//     children of q in S'_p (a previous root may have reached them).
//
// The printed guard of the first rule reads q = Parent(S_p, p) after the
// assignment S_p[q] ← dead, which never holds; S'_p is meant. Decided
// agreements are excluded: Decision is called once and only once.
func (c *Core) discover(q ranks.Rank, out []Out) []Out {
	if q == c.self || int64(q) >= int64(c.n) || c.dead.Has(q) {
		return out
	}
	type action struct {
		a      *agreement
		parent bool         // rule 1
		grand  []ranks.Rank // rule 2: Children(S'_p, q)
	}
	var acts []action
	snap := slices.Clone(c.open)
	for _, a := range snap {
		if a.tree == nil || a.decided {
			continue
		}
		switch a.status {
		case broadcasting:
			if p, ok := a.tree.Parent(c.self, &c.dead); ok && p == q {
				acts = append(acts, action{a: a, parent: true})
			}
		case gathering:
			if _, ok := a.tree.Parent(c.self, &c.dead); !ok && !a.origRoot && slices.Contains(c.children(a), q) {
				acts = append(acts, action{a: a, grand: a.tree.Children(q, &c.dead)})
			}
		}
	}
	c.dead.Add(q) // S_p[q] ← dead
	c.deadVer++
	var known *ranks.Set
	request := func(a *agreement, to ranks.Rank) {
		if known == nil {
			k := c.dead.Clone()
			known = &k
		}
		out = append(out, Out{To: to, Msg: Msg{Kind: ResultRequest, ID: a.id, Dead: *known}})
	}
	for _, x := range acts {
		a := x.a
		if a.decided {
			continue
		}
		if x.parent {
			if a.status != broadcasting {
				continue
			}
			if p, ok := a.tree.Parent(c.self, &c.dead); ok {
				out = append(out, c.upMsg(a, p))
				continue
			}
			a.contributed = ranks.Of(c.self)
			a.status = gathering
			for _, k := range c.children(a) {
				request(a, k)
			}
			continue
		}
		for _, g := range x.grand {
			if !c.dead.Has(g) {
				request(a, g)
			}
		}
	}
	// The deciding condition may now hold for any gathering agreement.
	for _, a := range slices.Clone(c.open) {
		if !a.decided && a.status == gathering {
			out = c.spontaneous(a, out)
		}
	}
	return out
}
