package limit

import (
	"net"
	"slices"
	"sync"
)

// Pending caps a listener's connections that have not identified
// themselves yet (no Hello, no first line): when n are pending (NewPending), adding
// one more evicts the oldest, which the caller closes. A peer that
// identifies itself as soon as it connects (the job's own processes do)
// is therefore admitted amid any number of silent strangers, unless more
// than n connect between its connect and its first message being read.
// It is safe for concurrent use.
type Pending struct {
	max int

	mu      sync.Mutex
	conns   []net.Conn // oldest first
	evicted uint64
}

// NewPending returns a Pending of at most n (≥ 1) connections.
func NewPending(n int) *Pending {
	return &Pending{max: max(n, 1)}
}

// Add records c as pending and returns the connection it evicted (nil if
// none), for the caller to close.
func (p *Pending) Add(c net.Conn) (evicted net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.conns) >= p.max {
		evicted = p.conns[0]
		p.conns = slices.Delete(p.conns, 0, 1)
		p.evicted++
	}
	p.conns = append(p.conns, c)
	return evicted
}

// Done removes c (it identified itself, or ended) and reports whether it
// was pending: false once it was evicted, or was never added.
func (p *Pending) Done(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.conns, c)
	if i < 0 {
		return false
	}
	p.conns = slices.Delete(p.conns, i, i+1)
	return true
}

// Len returns the number of pending connections.
func (p *Pending) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Evicted returns how many connections Add evicted.
func (p *Pending) Evicted() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.evicted
}
