package wire

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
)

// NewIncarnation returns an incarnation number for a process (or transport)
// starting now: the wall clock in microseconds in the high 44+ bits and 20
// random bits below, so incarnations of one rank are unpredictable yet
// ordered by start time, which is what lets a receiver call one "older"
// than another (restarts of a rank are seconds apart, far more than the
// clock skew of one host with itself).
func NewIncarnation() uint64 {
	var r [8]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return uint64(time.Now().UnixMicro())<<20 | binary.LittleEndian.Uint64(r[:])&(1<<20-1)
}

// Incarnations records the newest incarnation seen from each rank. It is
// safe for concurrent use and lock-free; one is shared by all the
// connections of a transport.
type Incarnations struct {
	w []atomic.Uint64
}

// NewIncarnations returns a table for ranks 0..n-1.
func NewIncarnations(n int) *Incarnations {
	return &Incarnations{w: make([]atomic.Uint64, n)}
}

// Latest returns the newest incarnation seen from r (0 if none or r is out
// of range).
func (t *Incarnations) Latest(r ranks.Rank) uint64 {
	if int64(r) >= int64(len(t.w)) {
		return 0
	}
	return t.w[r].Load()
}

// Observe records inc for r. It reports whether inc is newer than every
// incarnation seen before from r (a restart, or the first contact), and
// fails with ReasonStale if it is older than one already seen, or with
// ReasonUnknownRank if r is out of range.
func (t *Incarnations) Observe(r ranks.Rank, inc uint64) (bool, error) {
	if int64(r) >= int64(len(t.w)) {
		return false, errf(ReasonUnknownRank, "", "rank %d not below %d", r, len(t.w))
	}
	p := &t.w[r]
	for {
		old := p.Load()
		if inc < old {
			return false, errf(ReasonStale, "", "rank %d incarnation %#x older than %#x", r, inc, old)
		}
		if inc == old {
			return false, nil
		}
		if p.CompareAndSwap(old, inc) {
			return true, nil
		}
	}
}

// Session applies the per-connection rules to the frames read from one
// connection: the first frame must be a Hello meant for Self; every later
// frame must come from the same sender and incarnation as the Hello; and
// no frame may carry an incarnation older than the newest seen from its
// sender on any connection. It is not safe for concurrent use.
type Session struct {
	// Self is the receiving rank, which a Hello must name.
	Self ranks.Rank
	// Incarnations is the transport's shared table (nil: no cross-
	// connection check).
	Incarnations *Incarnations

	hello bool
	rank  ranks.Rank
	inc   uint64
}

// Peer returns the sender and incarnation established by the Hello, and
// false before it.
func (s *Session) Peer() (ranks.Rank, uint64, bool) { return s.rank, s.inc, s.hello }

// Accept checks an authenticated frame against the session. It reports
// restarted when a Hello announced an incarnation of its sender newer than
// one seen before, so the caller can drop its connections to the sender's
// previous incarnation.
func (s *Session) Accept(f *Frame) (restarted bool, err error) {
	if s.hello && (f.Sender != s.rank || f.Incarnation != s.inc) {
		return false, errf(ReasonStale, "", "frame from rank %d incarnation %#x on the connection of rank %d incarnation %#x",
			f.Sender, f.Incarnation, s.rank, s.inc)
	}
	switch f.Type {
	case Hello:
		to, err := DecodeHello(f.Payload)
		if err != nil {
			return false, err
		}
		if to != s.Self {
			return false, errf(ReasonMisdirected, "hello.to", "hello for rank %d reached rank %d", to, s.Self)
		}
	case Heartbeat:
		if _, err := DecodeHeartbeat(f.Payload); err != nil {
			return false, err
		}
		fallthrough
	default:
		if !s.hello {
			return false, errf(ReasonNoHello, "", "%s frame before hello", f.Type)
		}
	}
	if s.Incarnations != nil {
		if f.Type == Hello {
			prev := s.Incarnations.Latest(f.Sender)
			newer, err := s.Incarnations.Observe(f.Sender, f.Incarnation)
			if err != nil {
				return false, err
			}
			restarted = newer && prev != 0
		} else if latest := s.Incarnations.Latest(f.Sender); f.Incarnation < latest {
			return false, errf(ReasonStale, "", "rank %d incarnation %#x older than %#x", f.Sender, f.Incarnation, latest)
		}
	}
	s.hello, s.rank, s.inc = true, f.Sender, f.Incarnation
	return restarted, nil
}
