package main

import (
	"slices"
	"sync"
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

// event is one entry of the event log.
type event struct {
	kind           int
	rank, detector uint32
	detectedUnix   int64
	deliveredMono  int64
}

// eventLog records every event once, in delivery order, and lets readers
// (vigil_poll, the callback dispatcher) consume it at their own pace.
type eventLog struct {
	mu      sync.Mutex
	evs     []event
	gone    map[uint32]bool // failed or left
	sorted  []uint32        // the same ranks, increasing
	evicted bool
	notify  chan struct{} // signalled (non-blocking) on append
	pollAt  int
}

func newEventLog() *eventLog {
	return &eventLog{gone: map[uint32]bool{}, notify: make(chan struct{}, 1)}
}

// add appends e unless its rank is already recorded; it reports whether it
// did.
func (l *eventLog) add(e event) bool {
	l.mu.Lock()
	if e.kind == eventEvicted || e.kind == eventMinority {
		if l.evicted {
			l.mu.Unlock()
			return false
		}
		l.evicted = true
	} else {
		if l.gone[e.rank] {
			l.mu.Unlock()
			return false
		}
		l.gone[e.rank] = true
		i, _ := slices.BinarySearch(l.sorted, e.rank)
		l.sorted = slices.Insert(l.sorted, i, e.rank)
	}
	l.evs = append(l.evs, e)
	l.mu.Unlock()
	l.wake()
	return true
}

func (l *eventLog) wake() {
	select {
	case l.notify <- struct{}{}:
	default:
	}
}

// at returns event i, if there is one yet.
func (l *eventLog) at(i int) (event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.evs) {
		return event{}, false
	}
	return l.evs[i], true
}

// poll returns the next event not yet polled.
func (l *eventLog) poll() (event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pollAt >= len(l.evs) {
		return event{}, false
	}
	l.pollAt++
	return l.evs[l.pollAt-1], true
}

// copyDead copies the failed or departed ranks, in increasing order, to
// out (as many as fit) and returns how many there are, without allocating:
// vigil_dead_set and vigil_stats_get may be called in a tight loop.
func (l *eventLog) copyDead(out []uint32) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	copy(out, l.sorted)
	return len(l.sorted)
}

// isDead reports whether rank r failed or left.
func (l *eventLog) isDead(r uint32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gone[r]
}
