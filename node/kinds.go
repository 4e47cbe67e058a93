package node

import (
	"sync/atomic"

	"github.com/vigil-hpc/vigil/internal/wire"
)

// NumMsgKinds is the number of protocol message kinds (MsgKinds).
const NumMsgKinds = 8

// MsgKinds names the protocol message kinds in the order of
// Stats.ByKind: the kind label of the metrics endpoint and the keys of
// the agent's stats line. Index i is the message type byte i+1.
var MsgKinds = [NumMsgKinds]string{
	"newobserver", // the ring's NEWOBSERVER (T4)
	"leave",       // a clean departure's LEAVE
	"bcast",       // failure, departure and note broadcasts
	"evicted",     // EVICTED, to a rank held dead
	"agree",       // agreement (ERA)
	"sync",        // dead-list repair
	"probe",       // block mending's and split probes
	"alive",       // answers to probes
}

// KindStats counts the messages of one kind: sent (one per destination
// the transport accepted) and received (decoded), and their bytes (the
// message's encoding, without the transport's framing and tag).
type KindStats struct {
	Sent, Recv           uint64
	BytesSent, BytesRecv uint64
}

// kindCounters are the node's counters of one message kind, updated on
// the message path: the event loop sends, the transport's goroutines
// receive.
type kindCounters struct {
	sent, recv, bytesSent, bytesRecv atomic.Uint64
}

// kindIndex returns the index in MsgKinds of a message type, or -1.
func kindIndex(t wire.MsgType) int {
	if i := int(t) - 1; i >= 0 && i < NumMsgKinds {
		return i
	}
	return -1
}

// countSent counts one message of type t and size bytes handed to the
// transport.
func (n *Node) countSent(t wire.MsgType, size int) {
	if i := kindIndex(t); i >= 0 {
		k := &n.kinds[i]
		k.sent.Add(1)
		k.bytesSent.Add(uint64(size))
	}
}

// countRecv counts one received message of type t and size bytes.
func (n *Node) countRecv(t wire.MsgType, size int) {
	if i := kindIndex(t); i >= 0 {
		k := &n.kinds[i]
		k.recv.Add(1)
		k.bytesRecv.Add(uint64(size))
	}
}

// byKind reads the counters of every kind.
func (n *Node) byKind() (out [NumMsgKinds]KindStats) {
	for i := range n.kinds {
		k := &n.kinds[i]
		out[i] = KindStats{Sent: k.sent.Load(), Recv: k.recv.Load(), BytesSent: k.bytesSent.Load(), BytesRecv: k.bytesRecv.Load()}
	}
	return out
}
