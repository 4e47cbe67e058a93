// Package transport defines how Vigil nodes exchange protocol messages and
// heartbeats, independently of the network underneath.
//
// Two data paths are deliberately separate:
//   - messages (NEWOBSERVER, broadcasts, agreement traffic) go through Send
//     and arrive at the Handler given to the transport;
//   - heartbeats go through SendHeartbeat, called only by the emitter's pinned
//     OS thread, and land in the observer's Slots word for that emitter,
//     so the observer's check is the same load whatever the transport (an
//     RDMA write over verbs; a store by the receive path over TCP or memory).
//
// Implementations: transport/tcp (the commodity fallback), transport/mem (in
// memory, for tests of the cores and in-process clusters), and verbs.
package transport

import (
	"errors"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
)

// Handler receives one authenticated message payload. It is called from the
// transport's goroutines and must not block for long; the payload is owned
// by the handler.
type Handler func(from ranks.Rank, payload []byte)

// Transport moves messages and heartbeats between the ranks of one job.
type Transport interface {
	// Send queues payload for rank to and returns at once; delivery is
	// best effort and ordered per destination (a dead peer loses it). It
	// fails for an unknown rank, an oversized payload or a closed transport.
	Send(to ranks.Rank, payload []byte) error
	// SendHeartbeat makes seq visible in rank to's slot for this rank. It
	// is called only from the emitter thread and must not allocate on the
	// fast path.
	SendHeartbeat(to ranks.Rank, seq uint64) error
	// Stats returns counters since the transport started.
	Stats() Stats
	// Close stops every goroutine of the transport and waits for them.
	Close() error
}

// Failer is implemented by transports that can fail for good while the
// process lives on (the verbs transport after a device or queue-pair
// error): Failure returns why, or nil while the transport works. A rank
// whose transport failed sends no heartbeat and no message any more: the
// job evicts it, and it should exit.
type Failer interface {
	Failure() error
}

// Drainer is implemented by transports whose heartbeats wait in a socket
// until the observer collects them (UDP): nothing in the observer's process
// wakes up per heartbeat. DrainHeartbeats stores every authenticated
// heartbeat that arrived into the slots; the node calls it on the
// heartbeat thread before each check. It must not block or allocate.
type Drainer interface {
	DrainHeartbeats()
}

// HeartbeatFD is implemented by a Drainer whose heartbeats wait in one
// socket: a heartbeat thread outside Go drains only when it has data.
type HeartbeatFD interface {
	HeartbeatFD() int
}

// Worder is implemented by transports whose heartbeat to some observers is
// one store into a word mapped in this process (shared memory): the
// emitter's thread can then run outside the Go runtime
// (heartbeat.EmitterConfig.Sink). HeartbeatWord returns this rank's word
// in to's slot array, or nil while to is reached only otherwise (it may
// then start mapping it in the background). The word stays mapped until
// the transport closes.
type Worder interface {
	HeartbeatWord(to ranks.Rank) *uint64
}

// LifeWords is implemented by transports that map other ranks' slot
// arrays (shared memory): LifeWord returns rank r's life word, the word
// of r's own rank in r's slot array, which r's heartbeat thread raises at
// every period (heartbeat.EmitterConfig.Life), or nil while r's array is
// not mapped (it may then start mapping it in the background). A word
// that grows shows that r's heartbeat thread runs, whatever r's event
// loop does (hb.Ring.Life). Runnable reports whether r's agent, once its
// array is mapped, is a process of this host that is neither stopped nor
// gone: a thread whose word stands still in such a process is held by
// the kernel, not dead (hb.Ring.Runnable).
type LifeWords interface {
	LifeWord(r ranks.Rank) *uint64
	Runnable(r ranks.Rank) bool
}

// Warmer is implemented by transports whose heartbeat path to a rank is
// set up on first use (the shared-memory mapping of its slot array): Warm
// sets it up now for rs, waiting up to timeout for each rank, and returns
// how many of rs have it. A node calls it for its observer and its emitter
// before its start fence, so that its first heartbeats are stores made by
// the heartbeat thread alone and its emitter's life word can be read from
// the start.
type Warmer interface {
	Warm(timeout time.Duration, rs ...ranks.Rank) int
}

// Datagrams is implemented by transports whose heartbeat is one datagram
// on one socket (UDP): a heartbeat thread outside the Go runtime then sends
// it itself, with frames signed in advance (heartbeat.EmitterConfig.Sink
// and Sign).
type Datagrams interface {
	// HeartbeatDest returns the socket and the kernel socket address of a
	// heartbeat to rank to; false while that address is unknown. The
	// socket stays open until the transport closes.
	HeartbeatDest(to ranks.Rank) (fd int, addr []byte, ok bool)
	// HeartbeatSigner returns a function that writes the authenticated
	// heartbeat datagram of seq into dst and returns its length, with its
	// own state (nil when heartbeats are not datagrams).
	HeartbeatSigner() func(dst []byte, to ranks.Rank, seq uint64) int
}

// HeartbeatLanes is implemented by a HeartbeatFD transport that gives the
// watched emitter's heartbeats a socket of their own (HeartbeatFD), which
// no other sender can reach, and the port's other datagrams another
// (HeartbeatSweepFD), drained within a bounded budget: junk at the port
// may be dropped, never the watched emitter's heartbeats with it.
type HeartbeatLanes interface {
	// WatchHeartbeats points HeartbeatFD at emitter from's heartbeats;
	// the node calls it when its watched emitter changes.
	WatchHeartbeats(from ranks.Rank)
	// HeartbeatSweepFD returns the socket of the other datagrams, and
	// SweepHeartbeats drains it alone, within its budget.
	HeartbeatSweepFD() int
	SweepHeartbeats()
	// SetHeartbeatRebind sets the function told the rank whose newest
	// known incarnation changed: heartbeats to it signed in advance are
	// bound to the previous one (HeartbeatSigner binds each frame to the
	// incarnation of its receiver known at signing).
	SetHeartbeatRebind(f func(ranks.Rank))
}

// LaneDrops is implemented by a HeartbeatLanes transport that counts the
// datagrams the kernel dropped at the watched emitter's socket: a flood
// from the emitter's forged address, which may have taken the emitter's
// heartbeats with it (node asks the emitter for a sign of life over a
// message before its silence is held against it).
type LaneDrops interface {
	HeartbeatLaneDrops() uint64
}

// HeartbeatVerifier is implemented by a Drainer whose heartbeat datagrams
// a thread outside the Go runtime can authenticate without Go: a heartbeat
// datagram is fully determined by its sender, the sender's incarnation and
// the sequence number (under the job key), so the thread compares each one
// it receives with the datagram computed in advance for the sequence number
// it carries, and hands the others to HeartbeatDatagram
// (heartbeat.EmitterConfig.Verify).
type HeartbeatVerifier interface {
	// HeartbeatExpected returns a function that writes the exact datagram
	// of heartbeat seq from rank from in incarnation inc into dst and
	// returns its length (with its own state), the offset of the
	// little-endian sequence number in that datagram, and the slot word
	// from's heartbeats are stored in (nil for a rank out of range).
	HeartbeatExpected(from ranks.Rank, inc uint64) (sign func(dst []byte, seq uint64) int, seqAt int, word *uint64)
	// HeartbeatDatagram checks one datagram received on the heartbeat
	// socket as DrainHeartbeats does (stored when authentic, counted by
	// reason when rejected) and returns the sender and incarnation of an
	// authentic heartbeat. Call it from the goroutine that drains.
	HeartbeatDatagram(b []byte) (from ranks.Rank, inc uint64, ok bool)
}

// Stats counts traffic and rejected input.
type Stats struct {
	MsgsSent, MsgsRecv   uint64
	BytesSent, BytesRecv uint64
	HeartbeatsSent       uint64
	HeartbeatsRecv       uint64
	// MsgsDropped and HeartbeatsDropped count what the send side gave up
	// on: a full queue, an unreachable or dead peer, a failed write.
	MsgsDropped, HeartbeatsDropped uint64
	// KernelDropped counts the datagrams the kernel dropped at this
	// rank's heartbeat sockets, their receive buffers full (a flood).
	KernelDropped uint64
	// Rejected counts frames dropped on receipt, by reason.
	Rejected map[string]uint64
}

// Errors shared by transports.
var (
	ErrClosed      = errors.New("transport: closed")
	ErrUnknownRank = errors.New("transport: unknown rank")
	ErrTooLarge    = errors.New("transport: payload too large")
)
