package verbs

import (
	"log/slog"
	"time"
)

// linker is the link worker: one goroutine that creates, connects and
// frees the verbs objects of the RC heartbeat links (QP creation and
// destruction, the modify-QP transitions, the slot word's registration and
// memory-window bind, which may wait up to a second) and the QPs of the
// message links (rcmsg.go). Each is a system call or several; run on the
// progress engine they would stall every message for as long, and
// heartbeat links are set up exactly when failures are being propagated
// (an emitter whose observer died connects to a new one), message links
// during ordinary traffic (a frequent partner asks for one).
//
// The engine keeps the handshakes' state (pending, passive, accepting, the
// message links' pool) and the control messages; it hands the object work
// to the linker (offload),
// which runs jobs one at a time, in order, and hands the results back to
// the engine (toEngine) on the lock's to-do list, where they do not count
// against its bound, so that the worker never waits for the engine while
// the engine may wait for the worker's queue.
type linker struct {
	jobs chan func()
	// slowSetup, set by tests before Start, delays every job that sets up
	// a link (heartbeat or message), as a slow bind or address resolution
	// would.
	slowSetup time.Duration
}

// linkerQueue bounds the linker's job queue; a job that does not fit waits
// for room.
const linkerQueue = 1024

// runLinker is the link worker's loop.
func (t *Transport) runLinker() {
	defer t.wg.Done()
	for {
		select {
		case <-t.quit:
			return
		case job := <-t.lk.jobs:
			job()
		}
	}
}

// offload runs job on the link worker. If its queue is full the caller
// waits for room, so that a set-up never runs on the engine; once Close
// has begun, a job that does not fit runs at once (it can only free
// objects: set-ups see the transport closed).
func (t *Transport) offload(job func()) {
	select {
	case t.lk.jobs <- job:
	case <-t.quit:
		select {
		case t.lk.jobs <- job:
		default:
			job()
		}
	}
}

// freePassive closes observer ends on the link worker, logging what fails
// (they are already out of the state's passive list).
func (t *Transport) freePassive(ps ...*passiveQP) {
	if len(ps) == 0 {
		return
	}
	t.offload(func() {
		for _, p := range ps {
			if err := t.closePassive(p); err != nil {
				t.logLimited("passive", slog.LevelWarn, "closing an observer end of a heartbeat link", "emitter", p.emitter, "err", err)
			}
		}
	})
}

// freePending closes an abandoned link attempt's QP and CQ on the link
// worker, logging what fails (p is already out of the state's pending map).
func (t *Transport) freePending(p *pendingLink) {
	t.offload(func() {
		if err := p.close(); err != nil {
			t.logLimited("pending", slog.LevelWarn, "closing an abandoned heartbeat link attempt", "err", err)
		}
	})
}

// toEngine hands fn, which uses the engine's state, back to the next
// holder of t.mu without waiting, waking the engine if it sleeps. If
// Close finds fn still queued, drop runs instead, to free what fn would
// have kept.
func (t *Transport) toEngine(fn func(*state), drop func()) {
	t.todo.put(cmd{op: opDo, fn: fn, drop: drop}, false)
	t.eng.nudge()
}

// setupDelay waits for linker.slowSetup (tests).
func (t *Transport) setupDelay() {
	if d := t.lk.slowSetup; d > 0 {
		time.Sleep(d)
	}
}

// drainLinker runs the jobs left in the linker's queue once its goroutine
// has stopped (Close): jobs that free objects must run; jobs that would
// set a link up see the transport closed and do nothing.
func (t *Transport) drainLinker() {
	for {
		select {
		case job := <-t.lk.jobs:
			job()
		default:
			return
		}
	}
}

// dropCmds empties the to-do list once the engine has stopped (Close),
// running each command's drop.
func (t *Transport) dropCmds() {
	for _, c := range t.todo.take(nil) {
		if c.drop != nil {
			c.drop()
		}
	}
}
