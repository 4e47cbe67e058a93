package verbs

import (
	"log/slog"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/wire"
	ibv "github.com/vigil-hpc/vigil/verbs"
)

// The model: one lock, t.mu, owns the state the transport runs (the UD
// QP's posts and send buffers, the address handles, the reliability layer
// and its timers, the message links, the RC handshakes), and a *state
// (state.go) is had only by holding it, so every method of *state runs
// under it. Nobody waits for the lock but its usual holder, the engine:
// a Send or a UD heartbeat that finds it free posts itself (tryAcquire),
// and otherwise its work, like every link request, SetPeers and the link
// worker's results, goes on the lock's to-do list (todo.go), which each
// holder runs before its own work. Only the engine polls the completion
// queues, hands messages to the handler (with the lock released, from its
// loop's top: handOut) and sleeps; it sets sleeping before it looks at
// the to-do list's length, and whoever puts work there stores the length
// before it reads sleeping and writes the eventfd if it is set, so no
// work is left asleep. Off the lock, the link worker (linker.go) makes and
// frees the links' verbs objects, handed to it without waiting (offload),
// and the emitter writes RC heartbeats over links the engine publishes
// through an atomic pointer (hblink.go). docs/verbs-engine.md has the map.

// engine is the transport's progress engine, t.run. After traffic (a
// message sent or received; heartbeat datagrams do not count) it
// busy-polls its completion queues and the to-do list until pollUntil,
// yielding to the other goroutines between polls; then it arms the
// receive CQ (and the message links' CQ, rcmsg.go) and sleeps in poll(2)
// on their completion channels, the device's asynchronous event
// descriptor and an eventfd that a sender writes only when the engine
// sleeps. The sleep has a timeout only while a retransmission is pending
// (or a job waits for the link worker's queue): an idle engine never
// wakes up.
type engine struct {
	efd      int         // eventfd: wakes the sleeping engine
	sleeping atomic.Bool // the engine is (about to be) in poll(2)
	wakeups  atomic.Uint64
	one      [8]byte        // the eventfd increment (1, little-endian)
	fds      [4]unix.PollFd // the UD receive CQ's channel, async events, efd, the message CQ's channel (-1: none yet)
}

// initEngine creates the engine's eventfd (Open).
func (t *Transport) initEngine() error {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return err
	}
	e := &t.eng
	e.efd = fd
	e.one[0] = 1
	e.fds = [4]unix.PollFd{
		{Fd: int32(t.recvQ.ChannelFD()), Events: unix.POLLIN},
		{Fd: int32(t.ctx.AsyncFD()), Events: unix.POLLIN},
		{Fd: int32(fd), Events: unix.POLLIN},
		{Fd: -1, Events: unix.POLLIN},
	}
	return nil
}

// submit leaves c on the to-do list for the next holder of t.mu without
// waiting, waking the engine if it sleeps. It returns false if the list
// is full.
func (t *Transport) submit(c cmd) bool {
	if !t.todo.put(c, true) {
		return false
	}
	t.eng.nudge()
	return true
}

// nudge wakes the engine if it sleeps, after work was put on the to-do
// list. Pairs with sleep, which sets sleeping before it looks at the
// list's length: either that look finds the work, or nudge's load sees
// sleeping and wakes it.
func (e *engine) nudge() {
	if e.sleeping.Load() {
		e.wake()
	}
}

// wake makes the engine's poll(2) return.
func (e *engine) wake() {
	unix.Write(e.efd, e.one[:])
}

// Wakeups returns how many times the engine returned from sleeping:
// completion events, asynchronous events, wake-ups by a sender and
// retransmission timeouts. An idle transport does not wake up.
func (t *Transport) Wakeups() uint64 { return t.eng.wakeups.Load() }

// do runs fn with t.mu held, by the next holder, and waits for it: for
// code that must see or change the engine's state (tests). It returns
// false, without running fn, if the transport is closed or not started.
func (t *Transport) do(fn func(*state)) bool {
	if !t.started || t.closed.Load() {
		return false
	}
	done := make(chan struct{})
	for !t.submit(cmd{op: opDo, fn: func(st *state) { fn(st); close(done) }}) {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		return true
	case <-t.quit:
		return false
	}
}

// pollFor keeps the engine busy-polling for Config.PollFor from tn.
func (st *state) pollFor(tn int64) {
	if st.cfg.PollFor > 0 {
		st.pollUntil = max(st.pollUntil, tn+int64(st.cfg.PollFor))
	}
}

// run is the engine's loop (see engine). It holds t.mu while it works on
// the state and releases it while it yields, sleeps or runs the handler,
// when a Send may take it to post at once.
func (t *Transport) run() {
	defer t.wg.Done()
	rx := wire.NewCodec(t.datagramParams())
	fn := func(wc *ibv.WC, msg []byte) { t.locked.onDatagram(rx, wc, msg) } // called by ring.Poll, t.mu held
	var deadline int64
	lastAsync := now()
	for !t.closed.Load() {
		st := t.acquire()
		n := st.poll(fn)
		if len(st.ready) > 0 {
			st = t.handOut(st)
		}
		st.progress(n, &deadline)
		tn := now()
		if st.traffic {
			st.traffic = false
			st.pollFor(tn)
		}
		if tn < st.pollUntil {
			if tn-lastAsync >= int64(asyncEvery) {
				st.drainAsync()
				lastAsync = tn
			}
			st.release()
			// Poll again once other goroutines had their turn (a Send
			// may take the state meanwhile).
			runtime.Gosched()
			continue
		}
		t.sleep(st, fn, deadline) // releases t.mu
		lastAsync = now()
	}
}

// poll polls the message links' CQ, then the receive ring, once: the
// messages they complete go to ready. It returns the number of
// completions.
func (st *state) poll(fn func(*ibv.WC, []byte)) int {
	rc := 0
	if st.ml != nil { // before the datagrams: see msgLinks on ordering
		rc = st.pollRC()
	}
	n, err := st.ring.Poll(fn)
	if err != nil {
		st.logLimited("recv", slog.LevelError, "receive ring", "err", err)
		n = 0
	}
	return n + rc
}

// handOut runs the handler on the messages ready, in order, one at a
// time, with t.mu released: a reply the handler sends is posted at once
// by its Send (as any Send that finds t.mu free), and a handler that
// blocks does not hold up other senders. Only the engine's loop calls it,
// between polls, with st; it returns st again once it has taken the lock
// back (acquire: what the handler left on the to-do list runs then) and
// nothing more is ready (messages made ready meanwhile, by a Send that
// evicted a link, follow in a next round).
func (t *Transport) handOut(st *state) *state {
	for len(st.ready) > 0 {
		batch := st.ready
		st.ready = st.spare[:0]
		st.release()
		for i, d := range batch {
			t.msgsRecv.Add(1)
			t.bytesRecv.Add(uint64(len(d.msg)))
			t.handler(d.from, d.msg)
			batch[i] = delivery{}
		}
		st = t.acquire()
		st.spare = batch[:0]
	}
	return st
}

// progress follows a poll that found n completions and the hand-out of
// its messages: it gives the link worker the jobs deferred for want of
// room (offload), posts what the message links held, runs the commands
// the replies put on the to-do list, flushes the acks owed for ackDelay
// and moves the retransmission deadline.
func (st *state) progress(n int, deadline *int64) {
	if len(st.deferred) > 0 {
		st.flushDeferred()
	}
	if st.ml != nil && st.ml.held {
		st.pumpHeld()
	}
	if n > 0 {
		st.drainCmds() // replies the handler sent carry the acks
	}
	tn := now()
	if len(st.rel.owed) > 0 {
		st.rel.flushAcks(tn, ackDelay)
	}
	// Traffic (here or a Send's) may have sent or acked packets: the next
	// retransmission deadline moves.
	if st.traffic || st.rel.sent || (*deadline != 0 && tn >= *deadline) {
		st.rel.sent = false
		*deadline = st.rel.tick(tn)
	}
	if st.unreaped >= reapEvery {
		st.reap()
	}
}

// reapEvery is how many signalled UD sends the engine lets complete before
// it reaps them while busy (it always reaps before sleeping, and when it
// runs out of send buffers).
const reapEvery = 16

// drainCmds runs the to-do list, and what is put on it meanwhile, until
// it is empty.
func (st *state) drainCmds() {
	for {
		cs := st.todo.take(st.cmdBuf)
		st.cmdBuf = nil // a command that releases st.mu may let another holder drain
		if len(cs) == 0 {
			st.cmdBuf = cs
			return
		}
		for i := range cs {
			st.exec(cs[i])
			cs[i] = cmd{}
		}
		st.cmdBuf = cs[:0]
	}
}

// exec executes one command.
func (st *state) exec(c cmd) {
	switch c.op {
	case opSend:
		st.traffic = true
		if err := st.sendMsg(c.to, c.msg, true, now()); err != nil {
			st.msgsDropped.Add(1)
			st.logLimited("send", slog.LevelWarn, "message dropped", "to", c.to, "err", err)
		}
	case opHeartbeat:
		st.sendHeartbeatDatagram(c.to, c.seq)
	case opConnect:
		st.connect(c.to)
	case opDo:
		c.fn(st)
	}
}

// sleep arms the receive CQ and waits in poll(2) until a completion
// event, an asynchronous event, a sender's wake-up or the next
// retransmission deadline (none: no timeout). Called by the engine with
// t.mu held (st); it releases it.
func (t *Transport) sleep(st *state, fn func(*ibv.WC, []byte), deadline int64) {
	e := &t.eng
	e.sleeping.Store(true)
	if t.todo.len() != 0 { // work was put on the list after progress: see nudge
		e.sleeping.Store(false)
		st.drainCmds()
		st.release()
		return
	}
	st.rel.flushAcks(0, 0) // nothing owed waits while the engine sleeps
	st.reap()
	st.drainAsync()
	if err := t.recvQ.Arm(false); err != nil {
		e.sleeping.Store(false)
		st.release()
		t.logLimited("arm", slog.LevelError, "arming the receive CQ", "err", err)
		time.Sleep(10 * time.Millisecond)
		return
	}
	if st.ml != nil {
		if err := st.ml.cq.Arm(false); err != nil {
			t.logLimited("arm", slog.LevelError, "arming the message CQ", "err", err)
		}
	}
	// Arrived before the CQs were armed, or made ready by a command since
	// the hand-out: handed out at the loop's top instead.
	if st.poll(fn) > 0 || len(st.ready) > 0 {
		e.sleeping.Store(false)
		st.drainCmds()
		st.rel.flushAcks(now(), ackDelay)
		st.release()
		return
	}
	st.armed = deadline
	ms := -1
	if deadline != 0 {
		ms = max(0, int((deadline-now()+int64(time.Millisecond)-1)/int64(time.Millisecond)))
	}
	if len(st.deferred) > 0 && (ms < 0 || ms > 1) {
		ms = 1 // the link worker's queue was full: try again soon
	}
	st.release()
	for i := range e.fds {
		e.fds[i].Revents = 0
	}
	_, err := unix.Poll(e.fds[:], ms)
	e.sleeping.Store(false)
	e.wakeups.Add(1)
	if err != nil && err != unix.EINTR {
		t.logLimited("wait", slog.LevelError, "waiting for events", "err", err)
		time.Sleep(10 * time.Millisecond)
		return
	}
	if e.fds[0].Revents != 0 {
		t.ackEvents(t.recvQ)
	}
	if e.fds[3].Revents != 0 {
		st := t.acquire()
		if st.ml != nil {
			t.ackEvents(st.ml.cq)
		}
		st.release()
	}
	if e.fds[2].Revents != 0 {
		var b [8]byte
		unix.Read(e.efd, b[:])
	}
	if e.fds[1].Revents != 0 {
		st := t.acquire()
		st.drainAsync()
		st.release()
	}
}

// ackEvents reads and acknowledges every pending completion event of q's
// channel; an error reading them is logged.
func (t *Transport) ackEvents(q *ibv.CQ) {
	for {
		ok, err := q.TryEvent()
		if err != nil {
			t.logLimited("cqevent", slog.LevelError, "reading completion events", "err", err)
		}
		if !ok || err != nil {
			return
		}
	}
}
