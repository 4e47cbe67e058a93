package verbs

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	ibv "github.com/vigil-hpc/vigil/verbs"
)

// hbLink is an emitter's RC connection to its observer: an inline RDMA
// WRITE of the sequence number into the observer's slot for this rank.
//
// Life cycle: the emitter thread's first heartbeat to a new observer finds
// no link, asks the progress engine to connect, and sends that
// heartbeat (and the next ones) as an authenticated UD datagram, which the
// observer's receive path stores into the same slot word. The progress
// engine creates an RC QP, sends CONNREQ over the reliable UD channel;
// the observer creates its end, connects it and answers CONNACK; the
// emitter connects its end and publishes the link, and from the next
// heartbeat on the writes are RDMA. Links to other (former) observers are
// retired then: an emitter has one observer at a time.
//
// Every write is signalled and every Write polls the link's CQ once
// (ibv_poll_cq on an empty CQ costs next to nothing next to the post), so
// an error completion is seen by the first heartbeat after the device
// reports it, not up to 31 heartbeats later as when one write in 32 was
// signalled and the CQ polled only while that one was outstanding. A write
// whose completion reports an error (retry exceeded: the observer is dead
// or unreachable, or its end of the link is gone; remote access error: its
// window is gone) marks the link broken: that heartbeat and the next ones
// go over UD and a new link is requested.
//
// The device reports a write to a vanished QP only after its RC retries,
// ≈ 0.5 s with the default Config.RC, and a heartbeat lost that long is a
// false suspicion at δ = 400 ms. So the emitter also watches the
// completions themselves: once the writes have stopped completing for
// more than a period (stalled: from the fourth heartbeat after the
// observer stopped answering), each heartbeat is also sent as a datagram
// (VerbsStats.LateUD) until the completions come back or the error comes.
//
// All this is extra evidence only, counted in VerbsStats.RCErrors and
// logged: the emitter is not the observer's observer, so it never
// suspects anyone on it, and the observer side never sees it. Suspicion
// stays the observer's check of its own slot word not advancing within δ,
// whichever path wrote it.
//
// Ownership keeps the emitter's fast path free of locks and atomic
// read-modify-writes: only the emitter thread uses a link's Writer. A link
// the progress engine replaces (the emitter has a new observer) leaves
// links[] for the graveyard, and the emitter thread itself frees it at its
// next heartbeat (bury), so a write in progress never meets a freed
// Writer; Close frees what is left (the emitter has stopped by then).
type hbLink struct {
	peer   ranks.Rank
	cq     *ibv.CQ // the link's own CQ: a retired Writer's late completions can never reach another Writer
	qp     *ibv.QP
	qpn    uint32 // qp's number, readable after the emitter freed qp
	w      *ibv.Writer
	remote ibv.RemoteAddr
	broken atomic.Bool    // a write failed, or an async event reported a QP error
	writes uint64         // heartbeats written (emitter thread only)
	count  *atomic.Int64  // the transport's RC QP count
	total  *atomic.Uint64 // the transport's RC write count, published every publishEvery writes
	// stallAt and stallSince (emitter thread only, see stalled): 1 + the
	// writes known complete when two or more were last seen outstanding
	// (0: never), and since when no completion came (mono; 0: not timed).
	stallAt    uint64
	stallSince int64
}

// publishEvery is how many RDMA heartbeats a link counts before it adds
// them to VerbsStats.RCWrites (one atomic add per batch, not per write).
const publishEvery = 64

// stallAfter is the shortest time writes must have stopped completing
// before heartbeats also go as datagrams: above one period of a tight
// loop of writes (a benchmark, tens of µs each under emulation) whose
// completions trail by a few writes but keep coming.
const stallAfter = 2 * time.Millisecond

// stalled reports whether the link's writes have stopped completing. Every
// write is signalled, so one write outstanding is the one just posted.
// With two or more, the emitter notes how many writes were known complete;
// when the next heartbeat finds that number unchanged (no completion for
// a whole period) it notes the time, and the link is stalled once no
// completion came for stallAfter since. At one heartbeat per period: the
// first write the observer no longer answers is outstanding at the next
// heartbeat, the stall is noted at the one after, timed at the third and
// holds from the fourth on (if the period is at least stallAfter).
// Healthy writes complete in microseconds, far within a period; a tight
// loop of writes (a benchmark) sees completions between most writes and
// so seldom reads the clock (on rxe each write completed within its own
// post: the loop never read it). Emitter thread only; no allocation.
func (l *hbLink) stalled() bool {
	st := l.w.Stats()
	if st.Posted-st.Retired < 2 {
		return false
	}
	if st.Retired+1 != l.stallAt {
		l.stallAt, l.stallSince = st.Retired+1, 0
		return false
	}
	if l.stallSince == 0 {
		l.stallSince = mono()
		return false
	}
	return mono()-l.stallSince >= int64(stallAfter)
}

// epoch anchors mono.
var epoch = time.Now()

// mono is a monotonic clock in ns (> 0 after start).
func mono() int64 { return int64(time.Since(epoch)) + 1 }

// free publishes the link's unpublished writes and frees its writer, QP
// and CQ. Only the emitter thread (bury) or Close call it.
func (l *hbLink) free() error {
	l.count.Add(-1)
	l.total.Add(l.writes % publishEvery)
	return errors.Join(l.w.Close(), l.qp.Close(), l.cq.Close())
}

// retire takes a replaced link out of service: the emitter thread frees
// it at its next heartbeat. The caller has removed it from links[].
func (t *Transport) retire(l *hbLink) {
	t.graveMu.Lock()
	t.grave = append(t.grave, l)
	t.graveN.Store(int32(len(t.grave)))
	t.graveMu.Unlock()
}

// takeGrave empties the graveyard and returns what it held.
func (t *Transport) takeGrave() []*hbLink {
	t.graveMu.Lock()
	defer t.graveMu.Unlock()
	dead := t.grave
	t.grave = nil
	t.graveN.Store(0)
	return dead
}

// bury frees the retired links (emitter thread).
func (t *Transport) bury() {
	for _, l := range t.takeGrave() {
		if err := l.free(); err != nil {
			t.logLimited("bury", slog.LevelWarn, "freeing a retired heartbeat link", "observer", l.peer, "err", err)
		}
	}
}

// SendHeartbeat implements transport.Transport. Called only from the
// emitter thread; it does not allocate once the link to the observer is up
// (nor, on the UD path, once the address handle exists).
func (t *Transport) SendHeartbeat(to ranks.Rank, seq uint64) error {
	if int64(to) >= int64(t.cfg.N) {
		return transport.ErrUnknownRank
	}
	if t.closed.Load() {
		return transport.ErrClosed
	}
	if f := t.failed.Load(); f != nil {
		t.hbDropped.Add(1) // fail-stop: no heartbeat leaves any more
		return f.err
	}
	if t.graveN.Load() != 0 {
		t.bury()
	}
	if l := t.links[to].Load(); l != nil && !l.broken.Load() {
		err := l.w.Write(l.remote, seq)
		if err == nil {
			if l.writes++; l.writes%publishEvery == 0 {
				l.total.Add(publishEvery)
			}
			if !l.stalled() {
				return nil
			}
			// The writes stopped completing: the observer may not be
			// getting them. This heartbeat goes as a datagram too; the
			// link stays until its error comes (or completions resume).
			t.lateUD.Add(1)
			t.logLimited("rclate", slog.LevelInfo, "RDMA heartbeat writes not completing: heartbeats also sent over UD (evidence only, no suspicion)",
				"observer", to)
			return t.udHeartbeat(to, seq)
		}
		if !l.broken.Swap(true) {
			t.rcErrors.Add(1)
		}
		t.logLimited("rcerr", slog.LevelInfo, "RDMA heartbeat write failed: back to UD, reconnecting (evidence only, no suspicion)",
			"observer", to, "err", err)
	}
	t.requestLink(to)
	return t.udHeartbeat(to, seq)
}

// requestLink asks the progress engine for a link to observer to, once
// until that attempt ends or is older than linkTimeout. It does not
// block.
func (t *Transport) requestLink(to ranks.Rank) {
	if !t.started {
		return
	}
	if !t.connecting[to].CompareAndSwap(false, true) {
		if s := t.connectSince[to].Load(); now()-s < int64(linkTimeout) || !t.connectSince[to].CompareAndSwap(s, now()) {
			return
		}
		t.submit(cmd{op: opConnect, to: to}) // connect abandons the stale attempt
		return
	}
	t.connectSince[to].Store(now())
	if !t.submit(cmd{op: opConnect, to: to}) {
		t.connecting[to].Store(false)
	}
}

// udHeartbeat sends seq as an authenticated heartbeat datagram
// (sendHeartbeatDatagram). The emitter never waits, spins or creates an
// address handle: it posts the datagram itself if nothing is on the
// to-do list, t.mu is free (tryAcquire) and the observer's address
// handle exists, and otherwise leaves it on the list.
func (t *Transport) udHeartbeat(to ranks.Rank, seq uint64) error {
	if !t.started {
		t.hbDropped.Add(1)
		return errors.New("verbs transport: heartbeat before Start")
	}
	if st, ok := t.tryAcquire(); ok {
		switch {
		case t.closed.Load():
			st.release()
			t.hbDropped.Add(1)
			return transport.ErrClosed
		case t.todo.len() == 0 && st.dests[to] != nil:
			// Nothing queued to go before it, and the address handle
			// exists (creating one is the engine's).
			t.udHeartbeats.Add(1)
			st.sendHeartbeatDatagram(to, seq)
			st.release()
			return nil
		}
		st.release()
	}
	if !t.submit(cmd{op: opHeartbeat, to: to, seq: seq}) {
		t.hbDropped.Add(1)
		return errEngineFull
	}
	t.udHeartbeats.Add(1)
	return nil
}

// sendHeartbeatDatagram posts heartbeat seq to rank to inline, as a
// HEARTBEAT packet bound to to's incarnation (no allocation). A
// heartbeat it cannot post moves from UDHeartbeats to HeartbeatsDropped.
func (st *state) sendHeartbeatDatagram(to ranks.Rank, seq uint64) {
	d, err := st.dest(to)
	var f []byte
	if err == nil {
		f, err = st.frame(to, appendHeartbeatPkt(st.hbPkt[:0], seq))
	}
	if err == nil {
		err = st.postInline(d, f)
	}
	if err != nil {
		st.udHeartbeats.Add(^uint64(0))
		st.hbDropped.Add(1)
		st.logLimited("udhb", slog.LevelWarn, "UD heartbeat not sent", "to", to, "err", err)
	}
}

// connect starts the RC handshake towards observer to: the link
// worker creates the QP, then the engine sends CONNREQ with its endpoint.
// requestLink asks again only once an attempt is linkTimeout old (the
// observer could not make its end and said nothing): an attempt still
// pending then is abandoned for a new one.
func (st *state) connect(to ranks.Rank) {
	if l := st.links[to].Load(); l != nil && !l.broken.Load() {
		st.connecting[to].Store(false)
		return
	}
	if p := st.pending[to]; p != nil {
		st.logLimited("rcstale", slog.LevelWarn, "heartbeat link not answered: trying again", "observer", to)
		delete(st.pending, to)
		st.freePending(p)
	}
	p := &pendingLink{count: &st.rcQPs}
	st.pending[to] = p // qp nil until the link worker has created it
	t := st.Transport  // the link worker's job runs without t.mu
	st.offload(func() {
		qp, cq, err := t.createActive()
		t.toEngine(func(st *state) { st.sendConnReq(to, p, qp, cq, err) }, func() {
			p.qp, p.cq = qp, cq
			p.close()
		})
	})
}

// linkTimeout is how long an emitter waits for CONNACK before it starts
// its link request again (the emitter's heartbeats go over UD meanwhile).
const linkTimeout = 2 * time.Second

// createActive creates the emitter's end of a link (link worker).
func (t *Transport) createActive() (*ibv.QP, *ibv.CQ, error) {
	if t.closed.Load() {
		return nil, nil, transport.ErrClosed
	}
	t.setupDelay()
	cq, err := t.ctx.CreateCQ(2*writerSendWR, false)
	if err != nil {
		return nil, nil, err
	}
	qp, err := t.pd.CreateQP(ibv.QPConfig{Type: ibv.RC, SendCQ: cq, MaxSendWR: writerSendWR, MaxRecvWR: 1,
		MaxInline: 64, Netdev: t.cfg.Netdev})
	if err != nil {
		cq.Close()
		return nil, nil, err
	}
	t.rcQPs.Add(1)
	return qp, cq, nil
}

// sendConnReq takes the QP the link worker created into p and sends
// CONNREQ.
func (st *state) sendConnReq(to ranks.Rank, p *pendingLink, qp *ibv.QP, cq *ibv.CQ, err error) {
	p.qp, p.cq = qp, cq
	if st.pending[to] != p { // abandoned meanwhile (gaveUp, a restart, a time-out)
		st.freePending(p)
		return
	}
	if err == nil {
		err = st.rel.send(to, true, control{op: ctlConnReq, ep: p.qp.Endpoint()}.append(nil), now())
	}
	if err != nil {
		st.logLimited("rcqp", slog.LevelWarn, "cannot start heartbeat link", "observer", to, "err", err)
		delete(st.pending, to)
		st.freePending(p)
		st.connecting[to].Store(false)
	}
}

// pendingLink is an emitter's RC QP waiting for the observer's CONNACK.
type pendingLink struct {
	cq    *ibv.CQ
	qp    *ibv.QP
	count *atomic.Int64
}

// close frees the QP and CQ (link worker, or Close); a second call does
// nothing.
func (p *pendingLink) close() error {
	var errs []error
	if p.qp != nil {
		p.count.Add(-1)
		errs = append(errs, p.qp.Close())
		p.qp = nil
	}
	if p.cq != nil {
		errs = append(errs, p.cq.Close())
		p.cq = nil
	}
	return errors.Join(errs...)
}

// onControl handles a CONNREQ (this rank is the observer) or a CONNACK
// (this rank is the emitter), and the message links' control messages
// (rcmsg.go).
func (st *state) onControl(from ranks.Rank, m []byte) {
	c, err := decodeControl(m)
	if err != nil {
		st.reject("bad_control", err)
		return
	}
	switch c.op {
	case ctlConnReq:
		st.accept(from, c.ep)
	case ctlConnAck:
		st.established(from, c)
	case ctlMsgReq, ctlMsgReqRoom:
		st.onMsgReq(from, c.ep, c.op == ctlMsgReqRoom)
	case ctlMsgAck:
		st.onMsgAck(from, c)
	case ctlMsgUp:
		st.onMsgUp(from, c)
	case ctlMsgClose:
		st.onMsgClose(from, c.echo)
	case ctlMsgResend:
		st.onResend(from, c.seq, c.data)
	}
}

// accept answers emitter from's CONNREQ: a repeated request gets
// the same CONNACK; a new one has the link worker create, connect and bind
// the observer's end (createPassive), then installPassive answers.
func (st *state) accept(from ranks.Rank, ep ibv.Endpoint) {
	for _, p := range st.passive {
		if p.emitter == from && p.remote == ep.QPN { // a repeated request
			st.ack(from, p.qp, ep.QPN, p.rkey)
			return
		}
	}
	if q, ok := st.accepting[from]; ok && q == ep.QPN {
		return // being set up
	}
	st.accepting[from] = ep.QPN
	t := st.Transport // the link worker's job runs without t.mu
	st.offload(func() {
		pq, err := t.createPassive(from, ep)
		t.toEngine(func(st *state) { st.installPassive(from, ep.QPN, pq, err) }, func() {
			if pq != nil {
				t.closePassive(pq)
			}
		})
	})
}

// createPassive creates the observer's end of emitter from's heartbeat
// link (link worker). Its QP allows REMOTE_WRITE; the only memory the rkey
// reaches is the slot array, or with windows the emitter's own word.
func (t *Transport) createPassive(from ranks.Rank, ep ibv.Endpoint) (*passiveQP, error) {
	if t.closed.Load() {
		return nil, transport.ErrClosed
	}
	t.setupDelay()
	qp, err := t.pd.CreateQP(ibv.QPConfig{Type: ibv.RC, SendCQ: t.pcq, MaxSendWR: 1, MaxRecvWR: 1,
		Access: ibv.AccessRemoteWrite, Netdev: t.cfg.Netdev})
	if err != nil {
		return nil, err
	}
	t.rcQPs.Add(1)
	pq := &passiveQP{emitter: from, remote: ep.QPN, qp: qp}
	err = qp.Connect(ep, &t.cfg.RC)
	if err == nil && t.windows {
		// The emitter's window: its own slot word, through this QP
		// only. The word is also a region of its own, because rxe (Linux
		// 6.1) checks an access through a window against the range of
		// the window's region, not of the window.
		if pq.mr, err = t.slots.Sub(8*int(from), 8, ibv.AccessLocalWrite|ibv.AccessMWBind); err == nil {
			if pq.mw, err = t.pd.AllocMW(); err == nil {
				pq.rkey, err = qp.BindMW(pq.mw, pq.mr, 0, 8, ibv.AccessRemoteWrite, time.Second)
			}
		}
	}
	if err != nil {
		t.closePassive(pq)
		return nil, err
	}
	return pq, nil
}

// installPassive keeps the observer's end the link worker made for
// emitter from's QP remote, retiring the emitter's previous one and the
// oldest beyond maxPassive, and answers CONNACK.
func (st *state) installPassive(from ranks.Rank, remote uint32, pq *passiveQP, err error) {
	if q, ok := st.accepting[from]; !ok || q != remote {
		// The emitter restarted or asked again meanwhile: this end
		// answers nobody.
		if pq != nil {
			st.freePassive(pq)
		}
		return
	}
	delete(st.accepting, from)
	if err != nil {
		st.logLimited("accept", slog.LevelWarn, "cannot accept heartbeat link", "emitter", from, "err", err)
		return
	}
	var old []*passiveQP
	keep := st.passive[:0]
	for _, p := range st.passive {
		if p.emitter == from {
			old = append(old, p) // the emitter's previous link
		} else {
			keep = append(keep, p)
		}
	}
	st.passive = keep
	if len(st.passive) >= maxPassive {
		old = append(old, st.passive[0])
		st.passive = st.passive[1:]
	}
	st.passive = append(st.passive, pq)
	st.ack(from, pq.qp, pq.remote, pq.rkey)
	st.freePassive(old...)
}

func (t *Transport) closePassive(p *passiveQP) error {
	t.rcQPs.Add(-1)
	var errs []error
	if p.mw != nil {
		errs = append(errs, p.mw.Close())
	}
	if p.mr != nil {
		errs = append(errs, p.mr.Close())
	}
	return errors.Join(append(errs, p.qp.Close())...)
}

func (st *state) ack(to ranks.Rank, qp *ibv.QP, echo, rkey uint32) {
	m := control{op: ctlConnAck, ep: qp.Endpoint(), echo: echo, rkey: rkey}.append(nil)
	if err := st.rel.send(to, true, m, now()); err != nil {
		st.logLimited("ack", slog.LevelWarn, "cannot answer heartbeat link request", "emitter", to, "err", err)
	}
}

// established completes the emitter's end on CONNACK: the link
// worker connects it, and the engine publishes it if the observer has not
// restarted meanwhile.
func (st *state) established(from ranks.Rank, c control) {
	p := st.pending[from]
	if p == nil || p.qp == nil || p.qp.Num() != c.echo {
		return // an answer to an attempt already abandoned
	}
	delete(st.pending, from)
	remote := st.peers[from].Slots.Word(int(st.cfg.Self))
	if c.rkey != 0 {
		remote.RKey = c.rkey // the observer's window over our word
	}
	inc := st.peers[from].Inc
	t := st.Transport // the link worker's job runs without t.mu
	st.offload(func() {
		l, err := t.connectLink(from, p, c.ep, remote)
		if err != nil {
			p.close()
			t.connecting[from].Store(false)
			t.logLimited("connect", slog.LevelWarn, "cannot connect heartbeat link", "observer", from, "err", err)
			return
		}
		t.toEngine(func(st *state) {
			defer st.connecting[from].Store(false)
			if st.peers[from].Inc != inc { // restarted: this link leads nowhere
				st.retire(l)
				return
			}
			st.publishLink(l, c.ep.QPN)
		}, func() { l.free() })
	})
}

// connectLink connects the emitter's end to the observer's endpoint ep
// (link worker).
func (t *Transport) connectLink(from ranks.Rank, p *pendingLink, ep ibv.Endpoint, remote ibv.RemoteAddr) (*hbLink, error) {
	if t.closed.Load() {
		return nil, transport.ErrClosed
	}
	t.setupDelay()
	qp := p.qp
	err := qp.Connect(ep, &t.cfg.RC)
	var w *ibv.Writer
	if err == nil {
		// Every write signalled: its completion (or error) is known by
		// the next heartbeat (see hbLink).
		w, err = qp.NewWriter(1)
	}
	if err == nil {
		// A full send queue (the observer stopped acking) must not hold
		// the emitter thread: the write fails at once and goes over UD.
		w.SetFullWait(time.Millisecond)
	}
	if err != nil {
		if w != nil {
			w.Close()
		}
		return nil, err
	}
	return &hbLink{peer: from, count: &t.rcQPs, total: &t.rcWrites, cq: p.cq, qp: qp, qpn: qp.Num(), w: w, remote: remote}, nil
}

// publishLink makes l the emitter's link, retiring every other.
func (st *state) publishLink(l *hbLink, remoteQPN uint32) {
	from := l.peer
	if old := st.links[from].Swap(l); old != nil {
		st.retire(old)
	}
	for r := range st.links {
		if ranks.Rank(r) == from {
			continue
		}
		if old := st.links[r].Swap(nil); old != nil {
			st.retire(old)
		}
	}
	st.linksUp.Add(1)
	st.log.Info("RDMA heartbeat link up", "observer", from, "qpn", l.qpn, "remote_qpn", remoteQPN)
}
