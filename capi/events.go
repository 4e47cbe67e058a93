package main

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
)

// Event kinds, as in vigil.h.
const (
	eventFailed  = 1
	eventLeft    = 2
	eventEvicted = 3
	// eventMinority: this rank stopped on its own, holding most of the
	// job dead (node.Node.Minority).
	eventMinority = 4
)

// event is one event as vigil_event carries it.
type event struct {
	kind           int
	rank, detector uint32
	detectedUnix   int64
	deliveredMono  int64
}

// record is what vigil_poll, the failure callback, vigil_dead_set,
// vigil_is_dead and vigil_stats_get read. In ring mode it is the node's
// (nodeRecord: node.Node.Record, the snapshot of the detector's own record
// its event loop publishes): libvigil keeps no copy. In sporadic and daemon
// modes it is an eventLog, which is then the only record there is: the
// prober's verdicts, or the reports the node's daemon (another process)
// sent over its socket.
type record interface {
	// changed returns a channel that is signalled or closed once the
	// record changed after the call: take it before reading.
	changed() <-chan struct{}
	// at returns event i (delivery order), if there is one yet.
	at(i int) (event, bool)
	// copyDead copies the failed or departed ranks, in increasing order,
	// to out (as many as fit) and returns how many there are, without
	// allocating: vigil_dead_set and vigil_stats_get may be called in a
	// tight loop.
	copyDead(out []uint32) int
	// isDead reports whether rank r failed or left.
	isDead(r uint32) bool
}

// nodeRecord is the record of ring mode: the node's, read in place.
type nodeRecord struct {
	nd   atomic.Pointer[node.Node] // set by vigil_start
	self uint32
}

func (r *nodeRecord) latest() *node.Record {
	if nd := r.nd.Load(); nd != nil {
		return nd.Record()
	}
	return nil
}

func (r *nodeRecord) changed() <-chan struct{} {
	if rec := r.latest(); rec != nil {
		return rec.Changed()
	}
	return nil // not started: the dispatcher starts after the node
}

// at returns the i-th rank gone, and after them this rank's own stop
// (eventEvicted or eventMinority): the node publishes the failures it
// learned before its stop with it.
func (r *nodeRecord) at(i int) (event, bool) {
	rec := r.latest()
	if rec == nil {
		return event{}, false
	}
	if i < rec.Len() {
		ev := rec.Event(i)
		kind := eventFailed
		if ev.Left {
			kind = eventLeft
		}
		return event{kind: kind, rank: uint32(ev.Rank), detector: uint32(ev.Detector),
			detectedUnix: ev.DetectedAt.UnixNano(), deliveredMono: ev.DeliveredMono}, true
	}
	stopped, minority, mono, unix := rec.Stopped()
	if !stopped || i > rec.Len() {
		return event{}, false
	}
	kind := eventEvicted
	if minority {
		kind = eventMinority
	}
	return event{kind: kind, rank: r.self, detector: r.self, detectedUnix: unix, deliveredMono: mono}, true
}

func (r *nodeRecord) copyDead(out []uint32) int {
	rec := r.latest()
	if rec == nil {
		return 0
	}
	for i := range min(len(out), rec.Len()) {
		out[i] = uint32(rec.Rank(i))
	}
	return rec.Len()
}

func (r *nodeRecord) isDead(k uint32) bool {
	rec := r.latest()
	if rec == nil {
		return false
	}
	_, ok := rec.Known(ranks.Rank(k))
	return ok
}

// eventLog is the record of sporadic and daemon modes: every event once,
// in delivery order.
type eventLog struct {
	mu     sync.Mutex
	evs    []event
	gone   map[uint32]bool // failed or left
	sorted []uint32        // the same ranks, increasing
	notify chan struct{}   // signalled (non-blocking) on append
}

func newEventLog() *eventLog {
	return &eventLog{gone: map[uint32]bool{}, notify: make(chan struct{}, 1)}
}

// add appends e (eventFailed or eventLeft) unless its rank is already
// recorded; it reports whether it did.
func (l *eventLog) add(e event) bool {
	l.mu.Lock()
	if l.gone[e.rank] {
		l.mu.Unlock()
		return false
	}
	l.gone[e.rank] = true
	i, _ := slices.BinarySearch(l.sorted, e.rank)
	l.sorted = slices.Insert(l.sorted, i, e.rank)
	l.evs = append(l.evs, e)
	l.mu.Unlock()
	select {
	case l.notify <- struct{}{}:
	default:
	}
	return true
}

func (l *eventLog) changed() <-chan struct{} { return l.notify }

// at returns event i, if there is one yet.
func (l *eventLog) at(i int) (event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.evs) {
		return event{}, false
	}
	return l.evs[i], true
}

func (l *eventLog) copyDead(out []uint32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	copy(out, l.sorted)
	return len(l.sorted)
}

func (l *eventLog) isDead(r uint32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gone[r]
}
