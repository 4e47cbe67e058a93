package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// AgreeOp selects the operation F of an agreement: one of the built-ins
// below, or OpCustom+i for Config.AgreeOps[i] (detector.AgreeOp).
type AgreeOp = detector.AgreeOp

// Built-in agreement operations (package era).
const (
	// OpAND is the bitwise AND of byte strings, as MPI_Comm_agree.
	OpAND = detector.OpAND
	// OpOR is the bitwise OR of byte strings.
	OpOR = detector.OpOR
	// OpMin is the minimum of 8-byte little-endian unsigned integers.
	OpMin = detector.OpMin
	// OpMax is the maximum of 8-byte little-endian unsigned integers.
	OpMax = detector.OpMax
	// OpCustom is the code of Config.AgreeOps[0].
	OpCustom = detector.OpCustom
)

// AutoEpoch is the epoch of the agreement IDs that Agree and Shrink draw
// from one per-node counter; AgreeID refuses it.
const AutoEpoch = detector.AutoEpoch

// Errors returned by Agree, AgreeID and Shrink.
var (
	// ErrEvicted: the job declared this node dead; it takes no part in
	// agreements any more.
	ErrEvicted = errors.New("node: this rank was declared dead by the job")
	// ErrUnknownOp: the operation is neither a built-in nor configured.
	ErrUnknownOp = detector.ErrUnknownOp
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
	// every rank whose contribution is missing is in it. The node adopts
	// it: a rank of it the node held alive is delivered as a crash (its
	// Event's Detector is the rank itself), and a node named in it stops
	// (Evicted), so every survivor's Dead agrees with it.
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

// decided hands a decision to the caller waiting for it, if any.
func (n *Node) decided(d detector.Decision) {
	n.decisions.Add(1)
	k := agreeKey{d.Op, d.ID}
	if w, ok := n.waiters[k]; ok {
		delete(n.waiters, k)
		w <- Agreement{ID: d.ID, Value: d.Value, Dead: slices.Clone(d.Dead.Members()), Unacked: d.Unacked}
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
	return n.do(context.Background(), n.core.AckFailures)
}

func (n *Node) agree1(ctx context.Context, op AgreeOp, value []byte, id *era.ID) (Agreement, error) {
	if int(op) >= n.core.Ops() { // ops never change after Start
		return Agreement{}, fmt.Errorf("%w: %d (%d configured)", ErrUnknownOp, op, n.core.Ops())
	}
	if n.isEvicted.Load() {
		return Agreement{}, ErrEvicted
	}
	value = slices.Clone(value)
	t0 := time.Now()
	w := make(chan Agreement, 1)
	var key agreeKey
	var err error
	derr := n.do(ctx, func() {
		key.op = op
		if key.id, err = n.core.Agree(op, id, value); err != nil {
			err = fmt.Errorf("node: %w", err)
			return
		}
		n.waiters[key] = w // before the decision is flushed
	})
	if derr != nil {
		return Agreement{}, derr
	}
	if err != nil {
		return Agreement{}, err
	}
	select {
	case a := <-w:
		ns := time.Since(t0).Nanoseconds()
		n.agreeN.Add(1)
		n.agreeNs.Add(uint64(ns))
		for m := n.agreeMaxNs.Load(); ns > m; m = n.agreeMaxNs.Load() {
			if n.agreeMaxNs.CompareAndSwap(m, ns) {
				break
			}
		}
		return a, nil
	case <-ctx.Done():
		n.do(context.Background(), func() { delete(n.waiters, key) })
		return Agreement{}, fmt.Errorf("node: agreement %v: %w", key.id, ctx.Err())
	case <-n.evicted:
		return Agreement{}, fmt.Errorf("node: agreement %v: %w", key.id, ErrEvicted)
	case <-n.done:
		return Agreement{}, fmt.Errorf("node: agreement %v: %w", key.id, transport.ErrClosed)
	}
}

// AgreeStats returns the node's agreement counters and retained state.
func (n *Node) AgreeStats() (AgreeStats, error) {
	var s AgreeStats
	err := n.do(context.Background(), func() {
		cs := n.core.AgreeStats()
		s = AgreeStats{Records: cs.Records, Open: cs.Open, Waiting: len(n.waiters), Dropped: cs.Dropped,
			Started: cs.Started, Decided: cs.Decided, TreeMembers: cs.TreeMembers}
	})
	return s, err
}
