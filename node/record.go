package node

import (
	"time"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/ranks"
)

// Record is the node's record of the ranks gone and of its own stop, as
// its event loop last published it. It is a snapshot of the detector's own
// record (detector.Core.Gone), the only one the node keeps: the loop
// publishes a new Record whenever the detector delivers ranks gone or
// stops the node, before it sends the same events on Events. A Record is
// immutable and may be read from any goroutine.
type Record struct {
	gone *detector.GoneView
	// stopped: Evicted is (about to be) closed; minority: the stop was
	// the quorum rule's (Node.Minority); stoppedAt: when the loop
	// learned it.
	stopped, minority bool
	stoppedAt         detector.Time
	changed           chan struct{} // closed when a newer Record is published
}

// Record returns the node's latest record. Wait on its Changed channel for
// the next one.
func (n *Node) Record() *Record { return n.rec.Load() }

// Len returns how many ranks the node knows are gone.
func (r *Record) Len() int { return r.gone.Len() }

// Event returns the i-th rank gone (0 ≤ i < Len) in delivery order: the
// order of Events.
func (r *Record) Event(i int) Event { return nodeEvent(r.gone.Event(i)) }

// Rank returns the i-th rank gone (0 ≤ i < Len) in increasing order.
func (r *Record) Rank(i int) ranks.Rank { return r.gone.Rank(i) }

// Known returns the event of rank k, if the node knows it is gone.
func (r *Record) Known(k ranks.Rank) (Event, bool) {
	ev, ok := r.gone.Known(k)
	if !ok {
		return Event{}, false
	}
	return nodeEvent(ev), true
}

// Stopped reports whether the node stopped (Node.Evicted), whether the
// stop was its own as a minority (Node.Minority), and when it learned it
// (CLOCK_MONOTONIC and Unix nanoseconds). Every rank gone before the stop
// is in the same Record.
func (r *Record) Stopped() (stopped, minority bool, mono, unix int64) {
	return r.stopped, r.minority, r.stoppedAt.Mono, r.stoppedAt.Wall
}

// Changed is closed when the node publishes a newer Record.
func (r *Record) Changed() <-chan struct{} { return r.changed }

// nodeEvent is the Event of a detector's event.
func nodeEvent(e detector.Event) Event {
	return Event{Rank: e.Rank, Left: e.Left, Detector: e.Detector, DetectedAt: time.Unix(0, e.DetectedAt),
		DeliveredAt: time.Unix(0, e.Delivered.Wall), DeliveredMono: e.Delivered.Mono}
}

// publish makes the detector's record, and this node's stop if stopped,
// the node's Record (only the event loop calls it).
func (n *Node) publish(stopped, minority bool) {
	old := n.rec.Load()
	r := &Record{gone: n.core.Gone(old.gone), stopped: old.stopped || stopped, minority: old.minority || minority,
		stoppedAt: old.stoppedAt, changed: make(chan struct{})}
	if stopped && !old.stopped {
		r.stoppedAt = detector.Time{Mono: mono(), Wall: time.Now().UnixNano()}
	}
	n.rec.Store(r)
	close(old.changed)
}
