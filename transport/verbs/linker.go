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
// The state (t.mu's) keeps the handshakes (pending, passive, accepting,
// the message links' pool) and the control messages; its holder hands the
// object work to the linker (offload, which defers a job the full queue
// cannot take), which runs jobs one at a time, in order, and hands the
// results back (toEngine) on the lock's to-do list, where they do not
// count against its bound: neither ever waits for the other.
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

// offload hands job to the link worker without waiting: if the worker's
// queue is full, the job waits in st.deferred, behind those already
// there, until the engine moves it to the queue (flushDeferred: every
// pass, and within a millisecond while it sleeps), and Close runs what is
// left. So no holder of t.mu ever waits for the
// worker, and a set-up never runs on the engine.
func (st *state) offload(job func()) {
	if len(st.deferred) == 0 {
		select {
		case st.lk.jobs <- job:
			return
		default:
		}
	}
	st.deferred = append(st.deferred, job)
	st.deferredNew = true
}

// flushDeferred moves the deferred jobs to the link worker's queue, in
// order, as far as it has room (the engine, every pass).
func (st *state) flushDeferred() {
	for len(st.deferred) > 0 {
		select {
		case st.lk.jobs <- st.deferred[0]:
			st.deferred[0] = nil
			st.deferred = st.deferred[1:]
		default:
			return
		}
	}
}

// freePassive closes observer ends on the link worker, logging what fails
// (they are already out of the state's passive list).
func (st *state) freePassive(ps ...*passiveQP) {
	if len(ps) == 0 {
		return
	}
	t := st.Transport // the link worker's job runs without t.mu
	st.offload(func() {
		for _, p := range ps {
			if err := t.closePassive(p); err != nil {
				t.logLimited("passive", slog.LevelWarn, "closing an observer end of a heartbeat link", "emitter", p.emitter, "err", err)
			}
		}
	})
}

// freePending closes an abandoned link attempt's QP and CQ on the link
// worker, logging what fails (p is already out of the state's pending map).
func (st *state) freePending(p *pendingLink) {
	t := st.Transport // the link worker's job runs without t.mu
	st.offload(func() {
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

// drainLinker runs the jobs left in the linker's queue, then the deferred
// ones, once its goroutine has stopped (Close): jobs that free objects
// must run; jobs that would set a link up see the transport closed and do
// nothing.
func (st *state) drainLinker() {
	for {
		select {
		case job := <-st.lk.jobs:
			job()
		default:
			for _, job := range st.deferred {
				job()
			}
			st.deferred = nil
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
