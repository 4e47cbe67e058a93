package verbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	ibv "github.com/vigil-hpc/vigil/verbs"
)

// Messages above one UD datagram go over RC SEND, through a small pool of
// RC QPs ("message links", at most rcPool, least recently used evicted)
// whose receives all come from one shared receive queue of registered
// buffers. A message is cut into chunks of up to rcChunk bytes, each one
// SEND carrying one authenticated wire frame (the job key's MAC, as every
// datagram) whose payload is the chunk header and the bytes:
//
//	flags (first=1, last=2) | message seq (u64 LE) | message length (u32 LE) | chunk bytes
//
// The seq numbers this rank's RC messages to that peer from 1, across
// links: a message the RC path could not confirm is sent again over the
// reliable UD channel with the same seq (a RESEND control message), and
// the receiver delivers each seq once.
//
// A link is set up by the handshake of the heartbeat links, over the
// reliable UD channel: MSGREQ carries the requester's QP, MSGACK the
// answerer's, connected to it (on simultaneous requests the lower rank's
// wins), MSGUP tells the answerer that the requester's end is connected
// too, MSGCLOSE asks the peer to drop its end (eviction, refusal). A link
// is up (messages may take it) at the requester once its end is
// connected, at the answerer on MSGUP: so neither end posts a SEND before
// the other end can receive it (an RC SEND to a QP not yet ready to
// receive is dropped and waits for the RC retry timeout, or fails the
// link). The first message to
// a peer above one datagram asks for a link and goes over UD itself; so
// does the rcHotMsgs-th small message to a peer within rcHotWindow (a
// frequent partner: an RC SEND costs less than a UD one), but only while
// the pool has room (hotPeer).
//
// Ordering per peer: once the link is up every message to that peer takes
// it, small ones too, but none is posted on it while anything sent to the
// peer over UD is unacknowledged (acknowledged means delivered): the link
// holds them until then. When the link breaks (a completion
// error, MSGCLOSE, eviction), every message not yet confirmed by its send
// completion is sent again over UD, in order, before any newer message;
// the receiver polls its RC completions before its datagrams. So messages
// are delivered in send order, each once, whichever path they took.
// Errors are counted (VerbsStats.RCMsgErrors) and the peer gets no new
// link for rcRetryAfter.
//
// Everything here runs with t.mu held (methods of *state), except the
// links' verbs objects: their QPs are created, connected and destroyed by
// the link worker (linker.go), so that setting up a link (a frequent
// partner asks for one during ordinary traffic) never stalls a message.
// While the worker has a link's QP, l.qp is nil and the engine keeps the
// link's state (in the pool, not up: its messages go over UD). A link the
// engine drops meanwhile (a restart, the peer's request winning, a
// MSGCLOSE, the reliable layer giving up) is no longer in the pool when
// the worker's result comes back, and the QP is destroyed then. A link the
// engine drops while it holds its QP is out of the pool at once (nothing
// of it is posted again, its completions are ignored: owner and gen), and
// its QP is destroyed on the worker; the send buffers it had posted come
// back to the pool only after that, as the QP may still read them.
type msgLinks struct {
	srq    *ibv.SRQ
	cq     *ibv.CQ // sends and receives of every message link, with a channel
	recvMR *ibv.MR // srqDepth buffers of rcBuf bytes
	sendMR *ibv.MR // srqDepth buffers of rcBuf bytes
	free   []int   // free send buffers
	gen    []uint32
	owner  []*msgLink // the link a send buffer is posted on (nil: free)
	links  map[ranks.Rank]*msgLink
	byQPN  map[uint32]*msgLink
	clock  uint64   // LRU stamps
	out    []uint64 // per peer: the last message seq assigned
	in     []uint64 // per peer: the last message seq delivered
	part   []rcPartial
	retry  []int64 // per peer: no new link before (ns)
	held   bool    // a link holds messages until the UD channel to its peer drains
	tx, rx *wire.Codec
	wcs    []ibv.WC
}

// msgLink is one RC message QP to a peer.
type msgLink struct {
	peer ranks.Rank
	// qp is nil while the link worker creates or connects it (and once
	// the link is dropped); qpn is its number once created.
	qp     *ibv.QP
	qpn    uint32
	answer bool   // this end answers the peer's MSGREQ
	up     bool   // both ends connected: messages take it
	since  int64  // when the link took its place (ns): see stale
	room   bool   // requested for a frequent partner: the peer must not evict for it
	remote uint32 // the peer's QP number (once known)
	used   uint64 // LRU stamp
	queue  []*rcMsg
	bytes  int // in queue
	posted int // chunks posted, not completed
}

// rcMsg is a message on a link until every chunk of it completed.
type rcMsg struct {
	seq    uint64
	data   []byte
	next   int // bytes posted
	chunks int // chunks posted
	done   int // chunks completed
}

func (m *rcMsg) sent() bool { return m.next >= len(m.data) && m.chunks > 0 }

// rcPartial is a message being reassembled from one peer.
type rcPartial struct {
	seq uint64
	buf []byte
}

// Pool sizes.
const (
	rcPool       = 8         // message links
	rcChunk      = 16 << 10  // message bytes per SEND
	srqDepth     = 32        // shared receive buffers, and send buffers shared by the links
	rcHdr        = 1 + 8 + 4 // chunk header
	rcFirst      = 1         // chunk flags
	rcLast       = 2         //
	rcRetryAfter = time.Second
	rcHotMsgs    = 16                     // small messages to a peer within rcHotWindow ...
	rcHotWindow  = 100 * time.Millisecond // ... that ask for a message link
	rcBuf        = (wire.HeaderSize + rcHdr + rcChunk + wire.TagSize + 63) &^ 63
)

// rcOn says whether messages above one datagram may take RC
// (Config.udOnly turns the RC message path off).
func (t *Transport) rcOn() bool { return !t.cfg.udOnly }

// startMsgLinks says whether the pool exists. If not, it has the
// link worker make it (the first link asked for or requested; a CQ, an
// SRQ, 1 MiB of registered buffers: too long for the engine) unless that
// is under way or failed less than rcRetryAfter ago.
func (st *state) startMsgLinks() bool {
	if st.ml != nil {
		return true
	}
	if st.mlMaking || now() < st.mlRetry {
		return false
	}
	st.mlMaking = true
	t := st.Transport // the link worker's job runs without t.mu
	st.offload(func() {
		if t.closed.Load() {
			t.toEngine(func(st *state) { st.msgLinksMade(nil, transport.ErrClosed) }, func() {})
			return
		}
		t.setupDelay()
		ml, err := t.newMsgLinks()
		t.toEngine(func(st *state) { st.msgLinksMade(ml, err) }, func() {
			if ml != nil {
				t.closeMsgLinks(ml)
			}
		})
	})
	return false
}

// msgLinksMade installs the pool the link worker made, answers the
// requests that waited for it and asks for the links wanted meanwhile;
// if making it failed, it refuses the requests and tries again
// after rcRetryAfter.
func (st *state) msgLinksMade(ml *msgLinks, err error) {
	st.mlMaking = false
	waiting, wanted := st.mlWaiting, st.mlWanted
	st.mlWaiting, st.mlWanted = nil, nil
	if err != nil {
		st.mlRetry = now() + int64(rcRetryAfter)
		st.logLimited("rcinit", slog.LevelWarn, "no RC message path", "err", err)
		for _, w := range waiting {
			st.refuse(w.from, w.ep.QPN)
		}
		return
	}
	if st.ml == nil {
		st.installMsgLinks(ml)
	} else { // made on the engine meanwhile (initMsgLinks)
		t := st.Transport // the link worker's job runs without t.mu
		st.offload(func() {
			if err := t.closeMsgLinks(ml); err != nil {
				t.logLimited("rcinit", slog.LevelWarn, "freeing a second message link pool", "err", err)
			}
		})
	}
	for _, w := range waiting {
		st.onMsgReq(w.from, w.ep, w.room)
	}
	for to, evict := range wanted {
		st.rcWant(to, now(), evict)
	}
}

// msgReqWaiting is a peer's MSGREQ that came while the pool was being
// made.
type msgReqWaiting struct {
	from ranks.Rank
	ep   ibv.Endpoint
	room bool
}

// initMsgLinks makes the pool on the engine itself if it does not exist
// (a RESEND before any link, and tests).
func (st *state) initMsgLinks() error {
	if st.ml != nil {
		return nil
	}
	ml, err := st.newMsgLinks()
	if err != nil {
		return err
	}
	st.installMsgLinks(ml)
	return nil
}

// installMsgLinks makes ml the transport's pool.
func (st *state) installMsgLinks(ml *msgLinks) {
	st.ml = ml
	st.rcMsgBufs.Store(true)
	st.eng.fds[3].Fd = int32(ml.cq.ChannelFD())
}

// newMsgLinks creates the pool: the SRQ, its buffers, the send buffers and
// the CQ (any goroutine).
func (t *Transport) newMsgLinks() (*msgLinks, error) {
	const nb = srqDepth
	ml := &msgLinks{links: map[ranks.Rank]*msgLink{}, byQPN: map[uint32]*msgLink{},
		out: make([]uint64, t.cfg.N), in: make([]uint64, t.cfg.N), part: make([]rcPartial, t.cfg.N),
		retry: make([]int64, t.cfg.N), wcs: make([]ibv.WC, 16),
		gen: make([]uint32, nb), owner: make([]*msgLink, nb)}
	p := t.datagramParams() // the same SipHash tags as the datagrams
	p.MaxPayload = rcHdr + rcChunk
	ml.tx, ml.rx = wire.NewCodec(p), wire.NewCodec(p)
	var err error
	fail := func(err error) (*msgLinks, error) {
		t.closeMsgLinks(ml)
		return nil, err
	}
	if ml.cq, err = t.ctx.CreateCQ(4*nb, true); err != nil {
		return fail(err)
	}
	if ml.srq, err = t.pd.CreateSRQ(nb); err != nil {
		return fail(err)
	}
	if ml.recvMR, err = t.pd.AllocMR(nb*rcBuf, ibv.AccessLocalWrite); err != nil {
		return fail(err)
	}
	if ml.sendMR, err = t.pd.AllocMR(nb*rcBuf, ibv.AccessLocalWrite); err != nil {
		return fail(err)
	}
	for i := range nb {
		if err := ml.srq.PostRecv(uint64(i), ml.recvMR, i*rcBuf, rcBuf); err != nil {
			return fail(err)
		}
	}
	for i := nb - 1; i >= 0; i-- {
		ml.free = append(ml.free, i)
	}
	if err := ml.cq.Arm(false); err != nil {
		return fail(err)
	}
	return ml, nil
}

// closeMsgLinks frees the links and the pool (Close, or a failed init).
func (t *Transport) closeMsgLinks(ml *msgLinks) error {
	var errs []error
	for _, l := range ml.links {
		errs = append(errs, t.closeLinkQP(l))
	}
	if ml.srq != nil {
		errs = append(errs, ml.srq.Close())
	}
	for _, mr := range []*ibv.MR{ml.recvMR, ml.sendMR} {
		if mr != nil {
			errs = append(errs, mr.Close())
		}
	}
	if ml.cq != nil {
		errs = append(errs, ml.cq.Close())
	}
	return errors.Join(errs...)
}

func (t *Transport) closeLinkQP(l *msgLink) error {
	qp := l.qp
	l.qp = nil
	return t.closeMsgQP(qp)
}

// closeMsgQP destroys a message QP (nil: none).
func (t *Transport) closeMsgQP(qp *ibv.QP) error {
	if qp == nil {
		return nil
	}
	t.rcQPs.Add(-1)
	return qp.Close()
}

// freeMsgQP destroys a message QP on the link worker, logging what fails
// (nothing refers to it any more).
func (st *state) freeMsgQP(qp *ibv.QP) {
	if qp == nil {
		return
	}
	t := st.Transport // the link worker's job runs without t.mu
	st.offload(func() {
		if err := t.closeMsgQP(qp); err != nil {
			t.logLimited("rcclose", slog.LevelWarn, "destroying a message QP", "err", err)
		}
	})
}

// createMsgQP creates a message QP and, with ep, connects it to the
// peer's end ep (link worker).
func (t *Transport) createMsgQP(ml *msgLinks, ep *ibv.Endpoint) (*ibv.QP, error) {
	if t.closed.Load() {
		return nil, transport.ErrClosed
	}
	t.setupDelay()
	// Inline up to what the device granted the UD QP; a device whose RC
	// limit is smaller gets 64 bytes.
	cfg := ibv.QPConfig{Type: ibv.RC, SendCQ: ml.cq, RecvCQ: ml.cq, SRQ: ml.srq,
		MaxSendWR: srqDepth, MaxInline: t.inline, Netdev: t.cfg.Netdev, Access: ibv.AccessLocalWrite}
	qp, err := t.pd.CreateQP(cfg)
	if err != nil && cfg.MaxInline > 64 {
		cfg.MaxInline = 64
		qp, err = t.pd.CreateQP(cfg)
	}
	if err != nil {
		return nil, err
	}
	t.rcQPs.Add(1)
	if ep != nil {
		if err := qp.Connect(*ep, &t.cfg.RC); err != nil {
			t.closeMsgQP(qp)
			return nil, err
		}
	}
	return qp, nil
}

// connectMsgQP connects the requester's QP to the answerer's end ep
// (link worker).
func (t *Transport) connectMsgQP(qp *ibv.QP, ep ibv.Endpoint) error {
	if t.closed.Load() {
		return transport.ErrClosed
	}
	t.setupDelay()
	return qp.Connect(ep, &t.cfg.RC)
}

// sendMsg sends an application message : over the
// peer's message link if the ordering rule allows it (see msgLinks), else
// over the reliable UD channel, asking for a link if m is above one
// datagram. own says m is the engine's own copy.
func (st *state) sendMsg(to ranks.Rank, m []byte, own bool, now int64) error {
	if st.ml != nil {
		if l := st.ml.links[to]; l != nil && l.up {
			if limit := st.rel.cfg.queueMax * st.rel.cfg.frag; l.bytes+len(m) > limit {
				// As much as the UD channel holds for a peer.
				return fmt.Errorf("verbs transport: message link to rank %d full (%d bytes unconfirmed; peer dead or slow)", to, l.bytes)
			}
			if !own {
				m = append([]byte(nil), m...)
			}
			st.ml.out[to]++
			l.queue = append(l.queue, &rcMsg{seq: st.ml.out[to], data: m})
			l.bytes += len(m)
			st.ml.clock++
			l.used = st.ml.clock
			st.rcPump(l)
			return nil
		}
	}
	if err := st.rel.send(to, false, m, now); err != nil {
		return err
	}
	if st.rcOn() && to != st.cfg.Self {
		if len(m) > st.rel.cfg.frag {
			st.rcWant(to, now, true)
		} else if st.hotPeer(to, now) {
			st.rcWant(to, now, false)
		}
	}
	return nil
}

// hotPeer counts a small message to peer over UD and says whether peer
// has become a frequent partner: rcHotMsgs messages within rcHotWindow.
// A frequent partner gets a message link if the pool has room,
// as an RC SEND under soft-RoCE costs about half a UD one (a UD send
// schedules its completion outside the posting system call).
func (st *state) hotPeer(to ranks.Rank, now int64) bool {
	h := &st.hot[to]
	if now-h.since > int64(rcHotWindow) {
		h.since, h.n = now, 0
	}
	if h.n < rcHotMsgs {
		h.n++
	}
	return h.n >= rcHotMsgs
}

// hotCount is hotPeer's count of small messages to one peer.
type hotCount struct {
	since int64 // start of the window (ns)
	n     uint16
}

// rcPump posts what the send buffers allow of the link's queue, once
// nothing sent to the peer over UD is unacknowledged.
func (st *state) rcPump(l *msgLink) {
	ml := st.ml
	if st.rel.pending(l.peer) > 0 {
		ml.held = true
		return
	}
	for _, m := range l.queue {
		for !m.sent() {
			if len(ml.free) == 0 {
				ml.held = true // pumped again once a buffer comes back
				return
			}
			n := min(rcChunk, len(m.data)-m.next)
			var flags byte
			if m.next == 0 {
				flags |= rcFirst
			}
			if m.next+n == len(m.data) {
				flags |= rcLast
			}
			// The chunk is written where the frame's payload goes, so
			// that framing it copies it onto itself.
			slot := ml.free[len(ml.free)-1]
			off := slot * rcBuf
			b := ml.sendMR.Bytes()
			pl := b[off+wire.HeaderSize : off+wire.HeaderSize+rcHdr+n]
			pl[0] = flags
			binary.LittleEndian.PutUint64(pl[1:], m.seq)
			binary.LittleEndian.PutUint32(pl[9:], uint32(len(m.data)))
			copy(pl[rcHdr:], m.data[m.next:m.next+n])
			frame, err := ml.tx.Append(b[off:off:off+rcBuf], wire.Msg, pl)
			if err == nil {
				ml.gen[slot]++
				wrid := uint64(slot) | uint64(ml.gen[slot])<<32
				if len(frame) <= l.qp.MaxInline() {
					// Copied into the work request, so the adapter reads
					// no host memory for it (a DMA read saved on real
					// hardware; no difference measured under soft-RoCE).
					// The buffer stays the link's until the completion,
					// which confirms the chunk.
					err = l.qp.PostSendInline(wrid, frame, true)
				} else {
					err = l.qp.PostSend(wrid, ml.sendMR, off, len(frame), true)
				}
			}
			if err != nil {
				st.rcBreak(l, "posting a message SEND", err)
				return
			}
			ml.free = ml.free[:len(ml.free)-1]
			ml.owner[slot] = l
			m.next += n
			m.chunks++
			l.posted++
		}
	}
}

// pollRC handles the message links' completions: send
// completions free buffers and confirm messages, receives are
// reassembled and delivered. It returns the number of completions.
func (st *state) pollRC() int {
	ml := st.ml
	total := 0
	for {
		n, err := ml.cq.Poll(ml.wcs)
		if err != nil {
			st.logLimited("rcpoll", slog.LevelError, "polling the message CQ", "err", err)
			return total
		}
		total += n
		for i := range ml.wcs[:n] {
			wc := &ml.wcs[i]
			if wc.WRID < uint64(srqDepth) { // sends carry a generation above bit 32
				st.onRCRecv(wc)
			} else {
				st.onRCSent(wc)
			}
		}
		if n < len(ml.wcs) {
			break
		}
	}
	if total > 0 {
		st.traffic = true
	}
	return total
}

// pumpHeld posts the messages links held while the UD channel to their
// peer was not drained (after each batch of acks).
func (st *state) pumpHeld() {
	ml := st.ml
	ml.held = false
	for _, l := range ml.links {
		if l.up && len(l.queue) > 0 {
			st.rcPump(l)
		}
	}
}

// onRCSent handles one send completion.
func (st *state) onRCSent(wc *ibv.WC) {
	ml := st.ml
	slot := int(wc.WRID & 0xffffffff)
	if slot >= srqDepth || ml.gen[slot] != uint32(wc.WRID>>32) || ml.owner[slot] == nil {
		return // a buffer already reclaimed by rcBreak
	}
	l := ml.owner[slot]
	ml.owner[slot] = nil
	ml.free = append(ml.free, slot)
	l.posted--
	if err := wc.Err(); err != nil {
		st.rcBreak(l, "message SEND failed", err)
		return
	}
	if len(l.queue) > 0 {
		m := l.queue[0]
		m.done++
		if m.sent() && m.done == m.chunks {
			l.queue[0] = nil
			l.queue = l.queue[1:]
			l.bytes -= len(m.data)
		}
	}
	if ml.links[l.peer] == l {
		st.rcPump(l)
	}
}

// onRCRecv handles one receive completion from the shared receive queue.
func (st *state) onRCRecv(wc *ibv.WC) {
	ml := st.ml
	i := int(wc.WRID)
	defer func() {
		if err := ml.srq.PostRecv(uint64(i), ml.recvMR, i*rcBuf, rcBuf); err != nil {
			st.logLimited("srq", slog.LevelError, "reposting a shared receive", "err", err)
		}
	}()
	if err := wc.Err(); err != nil {
		if wc.Status != ibv.WCWRFlushErr {
			st.rcMsgErrors.Add(1)
			st.reject("rc_recv_error", err)
		}
		return
	}
	b := ml.recvMR.Bytes()[i*rcBuf : i*rcBuf+int(wc.ByteLen)]
	f, n, err := ml.rx.Decode(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%d bytes after a %d-byte frame", len(b)-n, n)
	}
	if err != nil {
		st.reject(reasonOr(err, "bad_rc_frame"), err)
		return
	}
	if l := ml.byQPN[wc.QPNum]; l != nil && l.peer != f.Sender {
		st.reject("wrong_rc_sender", fmt.Errorf("rank %d frame on the message link of rank %d", f.Sender, l.peer))
		return
	}
	if inc := st.peers[f.Sender].Inc; f.Incarnation != inc {
		// A link is set up with one incarnation of its peer.
		st.reject(wire.ReasonStale, fmt.Errorf("rank %d RC frame of incarnation %#x, the link's peer is %#x", f.Sender, f.Incarnation, inc))
		return
	}
	if f.Type != wire.Msg {
		st.reject("unexpected_type", fmt.Errorf("%s frame over RC", f.Type))
		return
	}
	flags, seq, size, chunk, err := decodeChunk(f.Payload)
	if err != nil {
		st.reject("bad_rc_chunk", err)
		return
	}
	p := &ml.part[f.Sender]
	if flags&rcFirst != 0 {
		if size > maxPayload {
			p.seq = 0
			st.reject("rc_too_large", fmt.Errorf("message of %d bytes from rank %d, above %d", size, f.Sender, maxPayload))
			return
		}
		p.seq, p.buf = seq, make([]byte, 0, size)
	} else if p.seq != seq {
		return // the rest of a message whose start went with a broken link
	}
	if len(p.buf)+len(chunk) > cap(p.buf) || (flags&rcLast != 0) != (len(p.buf)+len(chunk) == cap(p.buf)) {
		p.seq = 0
		st.reject("bad_rc_chunk", fmt.Errorf("rank %d: chunks of message %d do not add up to its %d bytes", f.Sender, seq, cap(p.buf)))
		return
	}
	p.buf = append(p.buf, chunk...)
	if flags&rcLast == 0 {
		return
	}
	m := p.buf
	p.seq, p.buf = 0, nil
	st.deliverRC(f.Sender, seq, m)
}

// deliverRC hands message seq from peer to the handler once.
func (st *state) deliverRC(from ranks.Rank, seq uint64, m []byte) {
	if seq <= st.ml.in[from] {
		return // already delivered (a RESEND of a message that did arrive)
	}
	st.ml.in[from] = seq
	st.ready = append(st.ready, delivery{from, m})
}

// decodeChunk splits an RC frame payload into chunk header (flags,
// message seq, message size) and bytes.
func decodeChunk(b []byte) (flags byte, seq uint64, size int, chunk []byte, err error) {
	if len(b) < rcHdr {
		return 0, 0, 0, nil, fmt.Errorf("verbs RC chunk: %d bytes, header needs %d", len(b), rcHdr)
	}
	flags, seq, size = b[0], binary.LittleEndian.Uint64(b[1:]), int(binary.LittleEndian.Uint32(b[9:]))
	if flags&^(rcFirst|rcLast) != 0 || seq == 0 || len(b)-rcHdr > size {
		return 0, 0, 0, nil, fmt.Errorf("verbs RC chunk: flags %#x seq %d, %d bytes of a %d-byte message", flags, seq, len(b)-rcHdr, size)
	}
	return flags, seq, size, b[rcHdr:], nil
}

// rcBreak takes a link out of service: every message it did not confirm
// goes again over UD (RESEND, in order), its buffers come back, its QP
// is destroyed and the peer gets no new link for rcRetryAfter.
func (st *state) rcBreak(l *msgLink, why string, err error) {
	ml := st.ml
	if ml.links[l.peer] != l {
		return
	}
	if err != nil {
		st.rcMsgErrors.Add(1)
		st.logLimited("rcmsg", slog.LevelWarn, "message link broken: unconfirmed messages go again over UD", "peer", l.peer, "why", why, "err", err,
			"messages", len(l.queue))
	}
	st.dropLink(l)
	ml.retry[l.peer] = now() + int64(rcRetryAfter)
	for _, m := range l.queue {
		st.rcResend(l.peer, m)
	}
	l.queue, l.bytes = nil, 0
}

// dropLink removes l from the pool: nothing of it is posted again and its
// completions are ignored (its send buffers have no owner). Its QP is
// destroyed on the link worker (if the worker has it now, when its job
// comes back), and the send buffers it had posted come back to the pool
// once the QP is gone, not before: until then the device may still read
// them.
func (st *state) dropLink(l *msgLink) {
	ml := st.ml
	delete(ml.links, l.peer)
	if l.qpn != 0 && ml.byQPN[l.qpn] == l {
		delete(ml.byQPN, l.qpn)
	}
	var held []int
	for s, o := range ml.owner {
		if o == l {
			ml.owner[s] = nil
			held = append(held, s)
		}
	}
	l.posted = 0
	qp := l.qp
	l.qp = nil
	if qp == nil { // the worker has it (nothing posted): its job frees it
		return
	}
	t := st.Transport // the link worker's job runs without t.mu
	st.offload(func() {
		if err := t.closeMsgQP(qp); err != nil {
			t.logLimited("rcclose", slog.LevelWarn, "destroying a message QP", "peer", l.peer, "err", err)
		}
		if len(held) > 0 {
			t.toEngine(func(st *state) {
				if st.ml == ml {
					ml.free = append(ml.free, held...)
					st.pumpHeld() // links that waited for a buffer
				}
			}, func() {})
		}
	})
}

// rcResend sends message m again over the reliable UD channel.
func (st *state) rcResend(to ranks.Rank, m *rcMsg) {
	c := control{op: ctlMsgResend, seq: m.seq}
	b := c.append(make([]byte, 0, 1+8+len(m.data)))
	b = append(b, m.data...)
	if err := st.rel.send(to, true, b, now()); err != nil {
		st.msgsDropped.Add(1)
		st.logLimited("resend", slog.LevelWarn, "message dropped", "to", to, "err", err)
		return
	}
	st.rcResent.Add(1)
}

// rcWant asks peer to for a message link. If the pool is full it
// evicts the least recently used idle link when evict is set (a message
// above one datagram), and otherwise asks nothing (a frequent partner).
func (st *state) rcWant(to ranks.Rank, now int64, evict bool) {
	if !st.startMsgLinks() {
		if st.mlMaking { // asked again once the pool exists
			if st.mlWanted == nil {
				st.mlWanted = map[ranks.Rank]bool{}
			}
			st.mlWanted[to] = st.mlWanted[to] || evict
		}
		return
	}
	ml := st.ml
	if l := ml.links[to]; l != nil {
		if !l.stale(now) {
			return
		}
		st.dropStale(l)
	}
	if now < ml.retry[to] {
		return
	}
	if full := len(ml.links) >= rcPool; full && (!evict || !st.rcRoom(to)) {
		return
	}
	// The link worker creates the QP, then the engine sends MSGREQ.
	l := st.newLink(to, false, 0)
	l.room = !evict
	t := st.Transport // the link worker's job runs without t.mu
	st.offload(func() {
		qp, err := t.createMsgQP(ml, nil)
		t.toEngine(func(st *state) { st.sendMsgReq(l, qp, err) }, func() { t.closeMsgQP(qp) })
	})
}

// sendMsgReq takes the QP the link worker created for l and sends MSGREQ.
func (st *state) sendMsgReq(l *msgLink, qp *ibv.QP, err error) {
	ml := st.ml
	if ml.links[l.peer] != l { // dropped meanwhile (a restart, the peer's request won)
		st.freeMsgQP(qp)
		return
	}
	if err == nil {
		l.qp, l.qpn = qp, qp.Num()
		ml.byQPN[l.qpn] = l
		op := byte(ctlMsgReq)
		if l.room {
			op = ctlMsgReqRoom
		}
		err = st.rel.send(l.peer, true, control{op: op, ep: qp.Endpoint()}.append(nil), now())
	}
	if err != nil {
		st.dropLink(l)
		ml.retry[l.peer] = now() + int64(rcRetryAfter)
		st.logLimited("rcwant", slog.LevelWarn, "cannot start a message link", "peer", l.peer, "err", err)
	}
}

// rcRoom makes room in the pool for a link to peer: false if it is full
// of links that are busy (an unconfirmed message) or not yet up.
func (st *state) rcRoom(peer ranks.Rank) bool {
	ml := st.ml
	if len(ml.links) < rcPool {
		return true
	}
	tn := now()
	var lru *msgLink
	for _, l := range ml.links {
		switch {
		case l.peer == peer:
		case l.stale(tn): // a handshake that did not finish goes first
			st.dropStale(l)
			return true
		case l.up && len(l.queue) == 0 && (lru == nil || l.used < lru.used):
			lru = l
		}
	}
	if lru == nil {
		return false
	}
	st.rcEvicted.Add(1)
	st.pollRC() // what it brought is delivered before the peer resends
	if ml.links[lru.peer] != lru {
		return len(ml.links) < rcPool
	}
	if err := st.rel.send(lru.peer, true, control{op: ctlMsgClose, echo: lru.remote}.append(nil), now()); err != nil {
		st.logLimited("rcevict", slog.LevelWarn, "cannot tell an evicted peer", "peer", lru.peer, "err", err)
	}
	st.dropLink(lru)
	return true
}

// newLink takes a place in the pool for a link to peer, whose QP the
// link worker is to make (answer: for the peer's request from its QP
// remote).
func (st *state) newLink(peer ranks.Rank, answer bool, remote uint32) *msgLink {
	ml := st.ml
	ml.clock++
	l := &msgLink{peer: peer, answer: answer, remote: remote, used: ml.clock, since: now()}
	ml.links[peer] = l
	return l
}

// rcSetupTimeout bounds a link's handshake: a link not up after it (a
// MSGACK or MSGUP lost when the reliable layer gave up on the peer, a
// MSGACK that could not be sent) gives its place back when the place or
// the peer is wanted again.
const rcSetupTimeout = 2 * time.Second

// stale says whether l is still not up rcSetupTimeout after it took its
// place.
func (l *msgLink) stale(now int64) bool {
	return !l.up && now-l.since > int64(rcSetupTimeout)
}

// dropStale drops a link whose handshake did not finish, telling the
// peer to drop its end if it has one.
func (st *state) dropStale(l *msgLink) {
	st.logLimited("rcstale", slog.LevelInfo, "message link handshake did not finish: dropped", "peer", l.peer)
	if l.remote != 0 {
		st.refuse(l.peer, l.remote)
	}
	st.dropLink(l)
}

// onMsgReq answers a peer's MSGREQ; a request with room set
// (MSGREQROOM, a frequent partner's) is refused rather than evict a link.
func (st *state) onMsgReq(from ranks.Rank, ep ibv.Endpoint, room bool) {
	if !st.rcOn() || from == st.cfg.Self {
		st.refuse(from, ep.QPN)
		return
	}
	if !st.startMsgLinks() {
		if !st.mlMaking { // making it failed lately
			st.refuse(from, ep.QPN)
			return
		}
		w := msgReqWaiting{from, ep, room}
		if i := slices.IndexFunc(st.mlWaiting, func(w msgReqWaiting) bool { return w.from == from }); i >= 0 {
			st.mlWaiting[i] = w // a newer request replaces the older
		} else {
			st.mlWaiting = append(st.mlWaiting, w)
		}
		return
	}
	ml := st.ml
	if l := ml.links[from]; l != nil {
		switch {
		case l.answer && l.remote == ep.QPN: // a repeated request
			if l.qp != nil {
				st.msgAck(from, l, ep.QPN)
			} // else: being answered
			return
		case !l.answer && !l.up && l.qpn != 0 && st.cfg.Self < from && !l.stale(now()):
			return // both asked: ours (sent) wins, the peer answers it
		default: // the peer dropped its end, or both asked and theirs wins
			st.rcBreak(l, "replaced by the peer's request", nil)
		}
	}
	if full := len(ml.links) >= rcPool; full && (room || !st.rcRoom(from)) {
		st.refuse(from, ep.QPN)
		return
	}
	// The link worker creates the QP and connects it, then the engine
	// answers MSGACK.
	l := st.newLink(from, true, ep.QPN)
	t := st.Transport // the link worker's job runs without t.mu
	st.offload(func() {
		qp, err := t.createMsgQP(ml, &ep)
		t.toEngine(func(st *state) { st.msgAccepted(l, qp, err) }, func() { t.closeMsgQP(qp) })
	})
}

// msgAccepted takes the QP the link worker created and connected for the
// peer's request and answers MSGACK. The link is up on the
// requester's MSGUP.
func (st *state) msgAccepted(l *msgLink, qp *ibv.QP, err error) {
	ml := st.ml
	if ml.links[l.peer] != l { // dropped meanwhile (a restart, a new request)
		st.freeMsgQP(qp)
		return
	}
	if err != nil {
		st.dropLink(l)
		st.logLimited("rcaccept", slog.LevelWarn, "cannot accept a message link", "peer", l.peer, "err", err)
		st.refuse(l.peer, l.remote)
		return
	}
	l.qp, l.qpn = qp, qp.Num()
	ml.byQPN[l.qpn] = l
	if st.msgAck(l.peer, l, l.remote) != nil {
		st.dropLink(l) // no MSGUP will come for it
	}
}

// msgAck answers the peer's request from QP echo with l's QP; an error is
// logged and returned.
func (st *state) msgAck(to ranks.Rank, l *msgLink, echo uint32) error {
	err := st.rel.send(to, true, control{op: ctlMsgAck, ep: l.qp.Endpoint(), echo: echo}.append(nil), now())
	if err != nil {
		st.logLimited("rcack", slog.LevelWarn, "cannot answer a message link request", "peer", to, "err", err)
	}
	return err
}

// refuse tells the peer to drop its end (QP number qpn).
func (st *state) refuse(to ranks.Rank, qpn uint32) {
	if err := st.rel.send(to, true, control{op: ctlMsgClose, echo: qpn}.append(nil), now()); err != nil {
		st.logLimited("rcrefuse", slog.LevelWarn, "cannot refuse a message link", "peer", to, "err", err)
	}
}

// onMsgAck has the link worker connect the requester's end.
func (st *state) onMsgAck(from ranks.Rank, c control) {
	var l *msgLink
	if st.ml != nil {
		l = st.ml.links[from]
	}
	if l == nil || l.answer || l.up || l.qpn != c.echo {
		st.refuse(from, c.ep.QPN) // an answer to an attempt already dropped
		return
	}
	if l.qp == nil {
		return // being connected: a repeated answer
	}
	qp := l.qp
	l.qp, l.remote = nil, c.ep.QPN // the worker's until connected
	t := st.Transport              // the link worker's job runs without t.mu
	st.offload(func() {
		err := t.connectMsgQP(qp, c.ep)
		t.toEngine(func(st *state) { st.msgConnected(l, qp, err) }, func() { t.closeMsgQP(qp) })
	})
}

// msgConnected takes back the requester's QP the link worker connected:
// the link is up, and MSGUP tells the answerer.
func (st *state) msgConnected(l *msgLink, qp *ibv.QP, err error) {
	if st.ml.links[l.peer] != l { // dropped meanwhile (a restart, MSGCLOSE)
		st.freeMsgQP(qp)
		return
	}
	l.qp = qp
	if err == nil {
		err = st.rel.send(l.peer, true, control{op: ctlMsgUp, ep: qp.Endpoint(), echo: l.remote}.append(nil), now())
	}
	if err != nil {
		st.rcBreak(l, "connecting a message link", err)
		st.refuse(l.peer, l.remote)
		return
	}
	l.up = true
	st.rcLinksUp.Add(1)
}

// onMsgUp puts the answerer's end in service once the requester's is
// connected.
func (st *state) onMsgUp(from ranks.Rank, c control) {
	var l *msgLink
	if st.ml != nil {
		l = st.ml.links[from]
	}
	if l == nil || !l.answer || l.qp == nil || l.qpn != c.echo || l.remote != c.ep.QPN {
		st.refuse(from, c.ep.QPN) // for an end already dropped
		return
	}
	if !l.up {
		l.up = true
		st.rcLinksUp.Add(1)
	}
}

// onMsgClose drops the link whose local QP number the peer names.
func (st *state) onMsgClose(from ranks.Rank, qpn uint32) {
	if st.ml == nil {
		return
	}
	if l := st.ml.links[from]; l != nil && l.qpn != 0 && l.qpn == qpn {
		st.pollRC()
		if st.ml.links[from] == l {
			st.rcBreak(l, "closed by the peer", nil)
		}
	}
}

// onResend delivers a message the peer sent again over UD.
func (st *state) onResend(from ranks.Rank, seq uint64, m []byte) {
	if err := st.initMsgLinks(); err != nil {
		st.reject("rc_resend", err)
		return
	}
	st.deliverRC(from, seq, m)
}

// msgPeerGone drops the link to a peer the reliable layer gave up on:
// its unconfirmed messages are dropped and counted, as the UD ones are.
func (st *state) msgPeerGone(to ranks.Rank) {
	if st.ml == nil {
		return
	}
	if l := st.ml.links[to]; l != nil {
		st.msgsDropped.Add(uint64(len(l.queue)))
		l.queue, l.bytes = nil, 0
		st.dropLink(l)
		st.ml.retry[to] = now() + int64(rcRetryAfter)
	}
}

// msgPeerRestarted forgets what the message links knew of rank r's
// previous incarnation (peerRestarted): its link is dropped with the
// messages it still held (counted, as the UD ones are), and message
// numbers both ways start again.
func (st *state) msgPeerRestarted(r ranks.Rank) {
	st.mlWaiting = slices.DeleteFunc(st.mlWaiting, func(w msgReqWaiting) bool { return w.from == r })
	delete(st.mlWanted, r)
	if st.ml == nil {
		return
	}
	st.msgPeerGone(r)
	ml := st.ml
	ml.out[r], ml.in[r], ml.part[r], ml.retry[r] = 0, 0, rcPartial{}, 0
}

// msgLinkPeers returns the peers with a message link, sorted (tests).
func (st *state) msgLinkPeers() (up, pending []ranks.Rank) {
	if st.ml == nil {
		return nil, nil
	}
	for p, l := range st.ml.links {
		if l.up {
			up = append(up, p)
		} else {
			pending = append(pending, p)
		}
	}
	slices.Sort(up)
	slices.Sort(pending)
	return up, pending
}
