package era

import (
	"fmt"

	"github.com/vigil-hpc/vigil/ranks"
)

// ID identifies one agreement. Epoch names the context (a communicator, or
// one incarnation of the group); Seq is chosen by the caller and must grow
// in the order in which every process starts the agreements of an epoch,
// as MPI collectives are called in the same order everywhere. The garbage
// collection of Section 4 relies on that order.
type ID struct {
	Epoch uint32
	Seq   uint64
}

// String formats id as epoch/seq.
func (id ID) String() string { return fmt.Sprintf("%d/%d", id.Epoch, id.Seq) }

// Kind is the type of an ERA message.
type Kind uint8

// Message kinds of ERA Part 2.
const (
	// Up carries a contribution towards the root: UP(a, Current).
	Up Kind = 1
	// Down carries the decision away from the root: DOWN(a, Result).
	Down Kind = 2
	// ResultRequest asks for the decision or the contribution of the
	// receiver: RESULTREQUEST(a). It is sent only by a root.
	ResultRequest Kind = 3
)

// String returns the paper's name of the kind.
func (k Kind) String() string {
	switch k {
	case Up:
		return "UP"
	case Down:
		return "DOWN"
	case ResultRequest:
		return "RESULTREQUEST"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Msg is one ERA message. Up and Down carry a value (a contribution or the
// decision): the Op value, the dead and acknowledged sets and the collection
// bound. ResultRequest carries only Dead: the ranks its sender (a root)
// knows dead, which the receiver adopts (it generalizes the paper's
// "∀ r < q: S_p[r] ← dead", see Core).
//
// Messages returned by a Core may share memory with each other and with the
// decided (immutable) state of the core: treat them as read-only.
//
// Msg is the protocol's data only: its binary encoding (version 1) is
// internal/wire's AppendEraMsg and DecodeEraMsg, which import era; era
// itself encodes nothing and imports no codec.
type Msg struct {
	Kind Kind
	ID   ID
	// Value is the Op value (Up, Down).
	Value []byte
	// Dead is the union of the known-dead sets of the contributors (Up),
	// the decided dead set (Down), or the sender's known-dead set
	// (ResultRequest).
	Dead ranks.Set
	// Acked is the intersection of the acknowledged sets of the
	// contributors (Up, Down); it is a subset of Dead.
	Acked ranks.Set
	// Collect is the garbage-collection bound of Section 4 (Up, Down):
	// every contributor had decided all the agreements of the epoch it had
	// started with a smaller Seq. In a Down it is agreed: each decider may
	// forget the results of the epoch's agreements below it.
	Collect uint64
}
