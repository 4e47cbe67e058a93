package detector

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// AgreeOp selects the operation F of an agreement: one of the built-ins
// below, or OpCustom+i for Config.AgreeOps[i]. Every rank must call the
// same agreement with the same operation.
type AgreeOp uint8

// Built-in agreement operations (package era).
const (
	// OpAND is the bitwise AND of byte strings, as MPI_Comm_agree.
	OpAND AgreeOp = iota
	// OpOR is the bitwise OR of byte strings.
	OpOR
	// OpMin is the minimum of 8-byte little-endian unsigned integers.
	OpMin
	// OpMax is the maximum of 8-byte little-endian unsigned integers.
	OpMax
	// OpCustom is the code of Config.AgreeOps[0].
	OpCustom
)

// AutoEpoch is the epoch of the agreement IDs that Agree draws from one
// per-rank counter (id nil); explicit IDs may not use it.
const AutoEpoch uint32 = 0

// ErrUnknownOp: the operation is neither a built-in nor configured.
var ErrUnknownOp = errors.New("detector: unknown agreement operation")

// AgreeStats describes the agreement state a Core holds.
type AgreeStats struct {
	// Records is the number of agreement records held by the era cores:
	// the agreements in progress and the decided results kept to answer
	// late requests until garbage collection drops them.
	Records int
	// Open is the number of undecided records.
	Open int
	// Dropped counts agreement messages the era cores ignored.
	Dropped uint64
	// Started and Decided count the agreements this rank started and saw
	// decided.
	Started, Decided uint64
	// TreeMembers is the number of ranks in the tree of the last automatic
	// agreement started here: Size, or fewer after a rebalancing.
	TreeMembers int
}

// agreeState is the Core's agreement service: one era.Core per operation.
type agreeState struct {
	ops   []era.Op
	size  int
	tree  era.Tree    // Config.AgreeTree, or era.Binary(size) once needed
	cores []*era.Core // by AgreeOp, created on first use
	seq   uint64      // the last Seq of AutoEpoch handed out
	acked ranks.Set   // failures acknowledged by this rank

	// Tree rebalancing (Config.AgreeRebalance): the last AutoEpoch
	// agreement decided here, its dead set, and the tree over its
	// survivors (rebuilt when the dead set changes).
	rebalance bool
	lastSeq   uint64
	lastDead  ranks.Set
	rebal     *era.HeapTree
	rebalDead ranks.Set
	lastTree  era.Tree // of the last AutoEpoch agreement started

	resend     int64 // Config.AgreeResend, ≤ 0: off
	lastResend int64 // when the last Resend round ran (monotonic ns)

	started, decided uint64

	// The agreed dead set (agreed.go): ranks of delivered decisions held
	// alive here, waiting for adoption; named: a delivered decision holds
	// this rank dead; adopting: adoptAgreed is running.
	adopt    []ranks.Rank
	named    bool
	adopting bool
}

func newAgreeState(cfg *Config) *agreeState {
	ops := append([]era.Op{era.BitAND, era.BitOR, era.Min, era.Max}, cfg.AgreeOps...)
	return &agreeState{ops: ops, size: cfg.Size, tree: cfg.AgreeTree, cores: make([]*era.Core, len(ops)),
		rebalance: cfg.AgreeRebalance, resend: cfg.AgreeResend}
}

// used reports whether this rank ever took part in an agreement: only then
// has Tick agreements to nudge.
func (st *agreeState) used() bool {
	for _, c := range st.cores {
		if c != nil {
			return true
		}
	}
	return false
}

// Ops returns the number of agreement operations (built-ins and custom).
func (c *Core) Ops() int { return len(c.agree.ops) }

// eraCore returns the era core of op, creating it with every rank this
// rank knows gone (ERA Part 4 for the deaths learned before it existed).
func (c *Core) eraCore(op AgreeOp) *era.Core {
	st := c.agree
	if e := st.cores[op]; e != nil {
		return e
	}
	if st.tree == nil { // built on first use: a simulated job holds thousands of Cores
		st.tree = era.Binary(st.size)
	}
	e := era.NewCore(c.cfg.Self, c.cfg.Size, st.tree, st.ops[op])
	st.cores[op] = e
	for _, r := range c.ring.Dead().Members() {
		c.agreeOuts(op, e.Dead(r))
	}
	return e
}

// agreeDead feeds ranks found gone to every era core (ERA Part 4: "process
// q is discovered dead").
func (c *Core) agreeDead(gone []ranks.Rank) {
	for op, e := range c.agree.cores {
		if e == nil {
			continue
		}
		for _, r := range gone {
			c.agreeOuts(AgreeOp(op), e.Dead(r))
		}
	}
}

// agreeTick repeats, every AgreeResend, the messages of agreements still
// open (era.Core.Resend), which recovers from messages the transport lost.
func (c *Core) agreeTick(now int64) {
	st := c.agree
	if st.resend <= 0 || now-st.lastResend < st.resend {
		return
	}
	st.lastResend = now
	for op, e := range st.cores {
		if e != nil {
			c.agreeOuts(AgreeOp(op), e.Resend())
		}
	}
}

// agreeStep hands an agreement message to its era core (ERA Part 2).
func (c *Core) agreeStep(from ranks.Rank, m *wire.Agree) {
	if int(m.Op) >= len(c.agree.ops) {
		c.bad("dropping agreement message for an unknown operation", "from", from, "op", m.Op)
		return
	}
	op := AgreeOp(m.Op)
	c.agreeOuts(op, c.eraCore(op).Step(from, m.Msg))
}

// agreeOuts carries out what an era core asked for: messages to send and
// decisions to return (the early return).
func (c *Core) agreeOuts(op AgreeOp, outs []era.Out) {
	st := c.agree
	for i := range outs {
		o := &outs[i]
		if o.Decided == nil {
			c.send([]ranks.Rank{o.To}, &wire.Agree{Op: uint8(op), Msg: o.Msg})
			continue
		}
		d := o.Decided
		st.decided++
		// A decision's dead set is acknowledged by this rank from now on:
		// the next agreement will not flag those failures again.
		st.acked.AddAll(d.Dead)
		if d.ID.Epoch == AutoEpoch && d.ID.Seq > st.lastSeq {
			st.lastSeq, st.lastDead = d.ID.Seq, d.Dead.Clone()
		}
		c.quorumDecided(Decision{Op: op, Decision: *d}) // delivers it, or holds it back (quorum.go)
	}
	c.adoptAgreed() // agreed.go
}

// Agree starts an agreement (seed 001) on value with operation op and
// returns its ID; the decision comes in a later Ready (possibly the next
// one). With id nil the ID is the next Seq of AutoEpoch on this rank: every
// rank must then start its automatic agreements in the same order. An
// explicit id must not be in AutoEpoch, and within its epoch every rank
// must start agreements in increasing Seq order.
func (c *Core) Agree(op AgreeOp, id *era.ID, value []byte) (era.ID, error) {
	st := c.agree
	if int(op) >= len(st.ops) {
		return era.ID{}, fmt.Errorf("%w: %d (%d configured)", ErrUnknownOp, op, len(st.ops))
	}
	key := era.ID{Epoch: AutoEpoch, Seq: st.seq + 1}
	if id != nil {
		if id.Epoch == AutoEpoch {
			return era.ID{}, fmt.Errorf("detector: agreement %v: epoch %d is reserved for automatic IDs", *id, AutoEpoch)
		}
		key = *id
	}
	ct := era.Contribution{Value: value, Acked: st.acked.Clone()}
	if id == nil && st.rebalance {
		var err error
		if ct.Tree, err = c.rebalanced(); err != nil {
			return era.ID{}, err
		}
	}
	outs, err := c.eraCore(op).Start(key, ct)
	if err != nil {
		return era.ID{}, fmt.Errorf("detector: %w", err)
	}
	if id == nil {
		st.seq++
		st.lastTree = ct.Tree
	}
	st.started++
	c.log(slog.LevelDebug, "agreement started", "id", key, "op", op)
	c.agreeOuts(op, outs)
	return key, nil
}

// NextAutoID returns the ID the next automatic agreement will have.
func (c *Core) NextAutoID() era.ID { return era.ID{Epoch: AutoEpoch, Seq: c.agree.seq + 1} }

// AckFailures acknowledges every failure this rank knows of now, as
// MPI_Comm_failure_ack: agreements started afterwards do not flag them
// (era.Decision.Unacked) on this rank's account.
func (c *Core) AckFailures() {
	c.agree.acked.AddAll(*c.ring.Dead())
}

// rebalanced returns the tree of the next automatic agreement under
// AgreeRebalance: the configured tree over the survivors of the previous
// agreement, which every rank decided alike before starting this one (nil
// while nobody is dead: the configured tree).
func (c *Core) rebalanced() (era.Tree, error) {
	st := c.agree
	if st.lastSeq != st.seq {
		return nil, fmt.Errorf("detector: agreement %d started before agreement %d returned on this rank: AgreeRebalance needs one agreement at a time", st.seq+1, st.seq)
	}
	if st.lastDead.Len() == 0 {
		return nil, nil
	}
	if st.rebal == nil || !st.rebalDead.Equal(st.lastDead) {
		if st.tree == nil {
			st.tree = era.Binary(st.size)
		}
		base, ok := st.tree.(*era.HeapTree)
		if !ok { // NewCore rules this out
			return nil, fmt.Errorf("detector: AgreeRebalance needs an *era.HeapTree, not %T", st.tree)
		}
		st.rebal, st.rebalDead = base.Over(era.Survivors(c.cfg.Size, st.lastDead)), st.lastDead.Clone()
	}
	return st.rebal, nil
}

// AgreeStats returns the agreement counters and retained state.
func (c *Core) AgreeStats() AgreeStats {
	st := c.agree
	s := AgreeStats{Started: st.started, Decided: st.decided, TreeMembers: c.cfg.Size}
	if h, ok := st.lastTree.(*era.HeapTree); ok {
		s.TreeMembers = h.Len()
	}
	for _, e := range st.cores {
		if e != nil {
			cs := e.Stats()
			s.Records += cs.Records
			s.Open += cs.Open
			s.Dropped += cs.Dropped
		}
	}
	return s
}
