package verbs

import (
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
	ibv "github.com/vigil-hpc/vigil/verbs"
)

// state is what t.mu guards: the UD QP's posts and send buffers, the
// address handles, the reliability layer with its timers, the message
// links, the RC handshakes and the engine's polling window. A *state is
// had only from acquire or tryAcquire (and by Open before any goroutine
// runs, and Close, which locks t.mu itself to drop the to-do list), so
// every method of *state runs with t.mu held, on whichever goroutine
// holds it (the engine, a Send, the emitter's UD heartbeat, Close).
// The Transport's own fields (the verbs objects made by Open, the
// counters, the heartbeat links' hand-over) are reached through the
// embedded pointer.
type state struct {
	*Transport

	// traffic is set when a message was sent or received: the engine
	// then polls on for PollFor.
	traffic bool
	// pollUntil is when the engine stops busy-polling (ns): PollFor
	// after traffic, and after a Send that posted itself (for the
	// reply).
	pollUntil int64
	// armed is the retransmission deadline the sleeping engine will wake
	// up for (ns; 0: none).
	armed int64
	// kick: the holder sent a message the sleeping engine must see
	// (release wakes it: Send).
	kick bool
	// deferredNew: the holder deferred a job for the link worker
	// (offload): release wakes the sleeping engine to move it.
	deferredNew bool

	cmdBuf []cmd // the to-do list's other storage, while drainCmds runs it
	// deferred are the link worker's jobs that found its queue full, in
	// order (offload).
	deferred []func()
	free     []int // free UD send buffers (of sendMR)
	dests    []*ibv.UDDest
	oldAHs   []*ibv.AH // address handles of restarted ranks' previous addresses (freed by Close)
	wcs      []ibv.WC
	hbPkt    [hbSize]byte
	unsig    int // inline datagrams posted unsignalled since the last signalled one
	unreaped int // signalled UD sends not yet reaped
	starved  int // datagrams not posted for want of a free send buffer

	// peers are the ranks' addresses; peers[r].Inc is the newest
	// incarnation known of rank r.
	peers []Address

	// The reliability layer and the RC handshake state.
	rel     *reliable
	tx      *wire.Codec
	txBuf   []byte
	pktBuf  []byte                      // the receiver's incarnation and a packet, being framed
	pending map[ranks.Rank]*pendingLink // RC QPs of handshakes in flight
	// accepting holds, per emitter, the QP number of the CONNREQ whose
	// observer end the link worker is setting up.
	accepting map[ranks.Rank]uint32
	passive   []*passiveQP
	ml        *msgLinks  // the RC message links (nil until first used)
	hot       []hotCount // per peer: small messages sent lately (hotPeer)
	// mlMaking: the link worker is making the pool (startMsgLinks);
	// mlWaiting: the peers' requests that wait for it; mlWanted: the
	// peers a link was wanted to meanwhile (true: may evict); mlRetry: no
	// new attempt before (ns) after one failed.
	mlMaking  bool
	mlWaiting []msgReqWaiting
	mlWanted  map[ranks.Rank]bool
	mlRetry   int64
	ready     []delivery // messages for the handler, from the packet being handled
	spare     []delivery // ready's other buffer, while handOut runs the handler

	// capture, if set (tests, before Start), sees every datagram this
	// transport frames, as posted (frame valid during the call).
	capture func(to ranks.Rank, frame []byte)
}

// acquire takes t.mu, waiting for it, and runs the to-do list (the
// engine, and the engine's own goroutine only: senders never wait).
func (t *Transport) acquire() *state {
	t.mu.Lock()
	st := &t.locked
	st.drainCmds()
	return st
}

// tryAcquire takes t.mu if it is free, without running the to-do list
// (a Send runs it before its own message; the emitter posts only when the
// list is empty).
func (t *Transport) tryAcquire() (*state, bool) {
	if !t.mu.TryLock() {
		return nil, false
	}
	return &t.locked, true
}

// release gives t.mu up, first waking the sleeping engine if a message
// the holder sent needs it (kick): to time its retransmission when the
// engine would wake up later than the message's first timeout, to poll
// for the reply, or to hand out messages that evicting a message link
// polled (rcRoom); or if the holder deferred a job for the link worker
// (deferredNew), which the engine moves to the worker's queue.
func (st *state) release() {
	e := &st.eng
	wake := st.deferredNew
	st.deferredNew = false
	if st.kick {
		st.kick = false
		wake = wake || st.armed == 0 || st.armed > now()+st.rel.cfg.rto0 || len(st.ready) > 0
	}
	wake = wake && e.sleeping.Load()
	st.mu.Unlock()
	if wake {
		e.wake()
	}
}
