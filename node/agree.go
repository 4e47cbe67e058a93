package node

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
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

// AutoEpoch is the epoch of the agreement IDs that Agree and Shrink draw
// from one per-node counter; AgreeID refuses it.
const AutoEpoch uint32 = 0

// Errors returned by Agree, AgreeID and Shrink.
var (
	// ErrEvicted: the job declared this node dead; it takes no part in
	// agreements any more.
	ErrEvicted = errors.New("node: this rank was declared dead by the job")
	// ErrUnknownOp: the operation is neither a built-in nor configured.
	ErrUnknownOp = errors.New("node: unknown agreement operation")
)

// Agreement is the outcome of one agreement, the same at every rank that
// returns it while an earlier decider is alive (ERA is non-uniform: see
// package era).
type Agreement struct {
	// ID identifies the agreement.
	ID era.ID
	// Value is F over the contributions of every rank that was alive when
	// the decision was made (and possibly of some that died since).
	Value []byte
	// Dead is the agreed set of ranks known dead, in increasing order:
	// every rank whose contribution is missing is in it.
	Dead []ranks.Rank
	// Unacked is ULFM's flag: some rank of Dead had not been acknowledged
	// by every contributor before the agreement (see AckFailures).
	Unacked bool
}

// Survivors returns the agreed group: the ranks 0..size-1 not in a.Dead.
func (a *Agreement) Survivors(size int) []ranks.Rank {
	d, _ := ranks.FromSorted(slices.Clone(a.Dead))
	return era.Survivors(size, d)
}

// AgreeStats describes the agreement state a node holds.
type AgreeStats struct {
	// Records is the number of agreement records held by the cores: the
	// agreements in progress and the decided results kept to answer late
	// requests until garbage collection drops them.
	Records int
	// Open is the number of undecided records.
	Open int
	// Waiting is the number of Agree calls waiting for a decision.
	Waiting int
	// Dropped counts agreement messages the cores ignored (from ranks
	// known dead, for collected agreements, or malformed).
	Dropped uint64
	// Started and Decided count the agreements this node started and saw
	// decided.
	Started, Decided uint64
	// TreeMembers is the number of ranks in the tree of the last Agree or
	// Shrink started here: Size, or fewer after a rebalancing.
	TreeMembers int
}

type agreeKey struct {
	op AgreeOp
	id era.ID
}

// agreeState is the node's agreement service. It is owned by the event
// loop: every field is read and written only there.
type agreeState struct {
	ops     []era.Op
	tree    era.Tree
	cores   []*era.Core // by AgreeOp, created on first use
	waiters map[agreeKey]chan Agreement
	seq     uint64    // the last Seq of AutoEpoch handed out
	acked   ranks.Set // failures acknowledged by this node

	// Tree rebalancing (Config.AgreeRebalance): the last AutoEpoch
	// agreement decided here, its dead set, and the tree over its
	// survivors (rebuilt when the dead set changes).
	rebalance bool
	lastSeq   uint64
	lastDead  ranks.Set
	rebal     *era.HeapTree
	rebalDead ranks.Set
	lastTree  era.Tree // of the last AutoEpoch agreement started

	resend     int64 // Config.AgreeResend in ns, ≤ 0: off
	lastResend int64 // mono() of the last Resend round

	started, decided uint64
}

func newAgreeState(cfg *Config) *agreeState {
	ops := append([]era.Op{era.BitAND, era.BitOR, era.Min, era.Max}, cfg.AgreeOps...)
	t := cfg.AgreeTree
	if t == nil {
		t = era.Binary(cfg.Size)
	}
	return &agreeState{ops: ops, tree: t, cores: make([]*era.Core, len(ops)),
		waiters: map[agreeKey]chan Agreement{}, rebalance: cfg.AgreeRebalance, resend: int64(cfg.AgreeResend)}
}

// core returns the core of op, creating it with every rank this node knows
// gone (ERA Part 4 for the deaths learned before it existed).
func (n *Node) core(op AgreeOp) *era.Core {
	st := n.agree
	if c := st.cores[op]; c != nil {
		return c
	}
	c := era.NewCore(n.cfg.Rank, n.cfg.Size, st.tree, st.ops[op])
	st.cores[op] = c
	for _, r := range n.Dead() {
		n.agreeOuts(op, c.Dead(r))
	}
	return c
}

// agreeDead feeds ranks found gone to every core (ERA Part 4: "process q is
// discovered dead"). Called on the event loop for every rank delivered.
func (n *Node) agreeDead(gone []ranks.Rank) {
	for op, c := range n.agree.cores {
		if c == nil {
			continue
		}
		for _, r := range gone {
			n.agreeOuts(AgreeOp(op), c.Dead(r))
		}
	}
}

// agreeTick runs on every check of the event loop: every AgreeResend it
// repeats the messages of agreements still open (era.Core.Resend), which
// recovers from messages the transport lost.
// used reports whether this node ever took part in an agreement: only
// then does the event loop wake to nudge them (agreeTick).
func (st *agreeState) used() bool {
	for _, c := range st.cores {
		if c != nil {
			return true
		}
	}
	return false
}

func (n *Node) agreeTick() {
	st := n.agree
	if st.resend <= 0 {
		return
	}
	now := mono()
	if now-st.lastResend < st.resend {
		return
	}
	st.lastResend = now
	for op, c := range st.cores {
		if c != nil {
			n.agreeOuts(AgreeOp(op), c.Resend())
		}
	}
}

// agreeRecv hands an agreement message to its core (ERA Part 2).
func (n *Node) agreeRecv(from ranks.Rank, m *wire.Agree) {
	if int(m.Op) >= len(n.agree.ops) {
		n.bad.Add(1)
		n.log.Warn("dropping agreement message for an unknown operation", "from", from, "op", m.Op)
		return
	}
	op := AgreeOp(m.Op)
	n.agreeOuts(op, n.core(op).Step(from, m.Msg))
}

// agreeOuts carries out what a core asked for: messages to send, and
// decisions to hand to the waiting callers (the early return).
func (n *Node) agreeOuts(op AgreeOp, outs []era.Out) {
	st := n.agree
	for i := range outs {
		o := &outs[i]
		if o.Decided == nil {
			n.send(o.To, &wire.Agree{Op: uint8(op), Msg: o.Msg})
			continue
		}
		d := o.Decided
		st.decided++
		// A decision's dead set is acknowledged by this node from now on:
		// the next agreement will not flag those failures again.
		st.acked.AddAll(d.Dead)
		if d.ID.Epoch == AutoEpoch && d.ID.Seq > st.lastSeq {
			st.lastSeq, st.lastDead = d.ID.Seq, d.Dead.Clone()
		}
		k := agreeKey{op, d.ID}
		if w, ok := st.waiters[k]; ok {
			delete(st.waiters, k)
			w <- Agreement{ID: d.ID, Value: d.Value, Dead: slices.Clone(d.Dead.Members()), Unacked: d.Unacked}
		}
	}
}

// Agree runs one agreement (seed 001, the Early Returning Agreement) on
// value with operation op, and returns as soon as this node knows the
// decision; the node keeps answering the others' late requests for it.
// Its ID is the next Seq of epoch AutoEpoch on this node: as with MPI
// collectives, every rank must call Agree and Shrink in the same order (use
// AgreeID for agreements that run concurrently).
//
// If ctx ends first, Agree returns ctx.Err(); the agreement goes on without
// the caller (the others may need this node's answers), and its decision is
// discarded here.
func (n *Node) Agree(ctx context.Context, op AgreeOp, value []byte) (Agreement, error) {
	return n.agree1(ctx, op, value, nil)
}

// AgreeID is Agree with an explicit agreement ID, for agreements that run
// concurrently. IDs must be unique, id.Epoch must not be AutoEpoch, and
// within an epoch every rank must start its agreements in increasing Seq
// order (the garbage collection of seed 001's Section 4 relies on it).
func (n *Node) AgreeID(ctx context.Context, id era.ID, op AgreeOp, value []byte) (Agreement, error) {
	if id.Epoch == AutoEpoch {
		return Agreement{}, fmt.Errorf("node: AgreeID(%v): epoch %d is reserved for Agree and Shrink", id, AutoEpoch)
	}
	return n.agree1(ctx, op, value, &id)
}

// Shrink agrees on the group of survivors, as MPI_Comm_shrink does: it
// returns the ranks not in the agreed dead set, in increasing order. It
// draws its ID like Agree.
func (n *Node) Shrink(ctx context.Context) ([]ranks.Rank, error) {
	a, err := n.Agree(ctx, OpAND, nil)
	if err != nil {
		return nil, err
	}
	return a.Survivors(n.cfg.Size), nil
}

// AckFailures acknowledges every failure this node knows of now, as
// MPI_Comm_failure_ack: agreements started afterwards do not raise
// Agreement.Unacked for them on this node's account. The dead sets of the
// decisions this node returns are acknowledged automatically.
func (n *Node) AckFailures() error {
	dead := n.Dead()
	return n.do(context.Background(), func() {
		for _, r := range dead {
			n.agree.acked.Add(r)
		}
	})
}

func (n *Node) agree1(ctx context.Context, op AgreeOp, value []byte, id *era.ID) (Agreement, error) {
	if int(op) >= len(n.agree.ops) { // ops never change after Start
		return Agreement{}, fmt.Errorf("%w: %d (%d configured)", ErrUnknownOp, op, len(n.agree.ops))
	}
	if n.isEvicted.Load() {
		return Agreement{}, ErrEvicted
	}
	value = slices.Clone(value)
	w := make(chan Agreement, 1)
	var key agreeKey
	var err error
	derr := n.do(ctx, func() {
		st := n.agree
		if id != nil {
			key = agreeKey{op, *id}
		} else {
			key = agreeKey{op, era.ID{Epoch: AutoEpoch, Seq: st.seq + 1}}
		}
		if _, dup := st.waiters[key]; dup {
			err = fmt.Errorf("node: agreement %v: %w", key.id, era.ErrStarted)
			return
		}
		ct := era.Contribution{Value: value, Acked: st.acked.Clone()}
		if id == nil && st.rebalance {
			if ct.Tree, err = n.rebalanced(); err != nil {
				return
			}
		}
		if id == nil {
			st.lastTree = ct.Tree
		}
		c := n.core(op)
		st.waiters[key] = w
		var outs []era.Out
		outs, err = c.Start(key.id, ct)
		if err != nil {
			delete(st.waiters, key)
			err = fmt.Errorf("node: %w", err)
			return
		}
		if id == nil {
			st.seq++
		}
		st.started++
		n.agreeOuts(op, outs)
	})
	if derr != nil {
		return Agreement{}, derr
	}
	if err != nil {
		return Agreement{}, err
	}
	select {
	case a := <-w:
		return a, nil
	case <-ctx.Done():
		n.do(context.Background(), func() { delete(n.agree.waiters, key) })
		return Agreement{}, fmt.Errorf("node: agreement %v: %w", key.id, ctx.Err())
	case <-n.evicted:
		return Agreement{}, fmt.Errorf("node: agreement %v: %w", key.id, ErrEvicted)
	case <-n.done:
		return Agreement{}, fmt.Errorf("node: agreement %v: %w", key.id, transport.ErrClosed)
	}
}

// rebalanced returns the tree of the next AutoEpoch agreement under
// Config.AgreeRebalance: the configured tree over the survivors of the
// previous agreement, which every rank decided alike before starting this
// one (nil while nobody is dead: the configured tree).
func (n *Node) rebalanced() (era.Tree, error) {
	st := n.agree
	if st.lastSeq != st.seq {
		return nil, fmt.Errorf("node: agreement %d started before agreement %d returned on this rank: Config.AgreeRebalance needs one agreement at a time", st.seq+1, st.seq)
	}
	if st.lastDead.Len() == 0 {
		return nil, nil
	}
	if st.rebal == nil || !st.rebalDead.Equal(st.lastDead) {
		base, ok := st.tree.(*era.HeapTree)
		if !ok { // Validate rules this out
			return nil, fmt.Errorf("node: Config.AgreeRebalance needs an *era.HeapTree, not %T", st.tree)
		}
		st.rebal, st.rebalDead = base.Over(era.Survivors(n.cfg.Size, st.lastDead)), st.lastDead.Clone()
	}
	return st.rebal, nil
}

// AgreeStats returns the node's agreement counters and retained state.
func (n *Node) AgreeStats() (AgreeStats, error) {
	var s AgreeStats
	err := n.do(context.Background(), func() {
		st := n.agree
		s.Waiting, s.Started, s.Decided = len(st.waiters), st.started, st.decided
		s.TreeMembers = n.cfg.Size
		if h, ok := st.lastTree.(*era.HeapTree); ok {
			s.TreeMembers = h.Len()
		}
		for _, c := range st.cores {
			if c != nil {
				cs := c.Stats()
				s.Records += cs.Records
				s.Open += cs.Open
				s.Dropped += cs.Dropped
			}
		}
	})
	return s, err
}
