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
// Everything here runs on the progress engine (t.mu held), except the
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

// startMsgLinks says whether the pool exists (engine). If not, it has the
// link worker make it (the first link asked for or requested; a CQ, an
// SRQ, 1 MiB of registered buffers: too long for the engine) unless that
// is under way or failed less than rcRetryAfter ago.
func (t *Transport) startMsgLinks() bool {
	if t.ml != nil {
		return true
	}
	if t.mlMaking || now() < t.mlRetry {
		return false
	}
	t.mlMaking = true
	t.offload(func() {
		if t.closed.Load() {
			t.toEngine(func() { t.msgLinksMade(nil, transport.ErrClosed) }, func() {})
			return
		}
		t.setupDelay()
		ml, err := t.newMsgLinks()
		t.toEngine(func() { t.msgLinksMade(ml, err) }, func() {
			if ml != nil {
				t.closeMsgLinks(ml)
			}
		})
	})
	return false
}

// msgLinksMade installs the pool the link worker made, answers the
// requests that waited for it and asks for the links wanted meanwhile
// (engine); if making it failed, it refuses the requests and tries again
// after rcRetryAfter.
func (t *Transport) msgLinksMade(ml *msgLinks, err error) {
	t.mlMaking = false
	waiting, wanted := t.mlWaiting, t.mlWanted
	t.mlWaiting, t.mlWanted = nil, nil
	if err != nil {
		t.mlRetry = now() + int64(rcRetryAfter)
		t.logLimited("rcinit", slog.LevelWarn, "no RC message path", "err", err)
		for _, w := range waiting {
			t.refuse(w.from, w.ep.QPN)
		}
		return
	}
	if t.ml == nil {
		t.installMsgLinks(ml)
	} else { // made on the engine meanwhile (initMsgLinks)
		t.offload(func() {
			if err := t.closeMsgLinks(ml); err != nil {
				t.logLimited("rcinit", slog.LevelWarn, "freeing a second message link pool", "err", err)
			}
		})
	}
	for _, w := range waiting {
		t.onMsgReq(w.from, w.ep, w.room)
	}
	for to, evict := range wanted {
		t.rcWant(to, now(), evict)
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
func (t *Transport) initMsgLinks() error {
	if t.ml != nil {
		return nil
	}
	ml, err := t.newMsgLinks()
	if err != nil {
		return err
	}
	t.installMsgLinks(ml)
	return nil
}

// installMsgLinks makes ml the transport's pool (engine).
func (t *Transport) installMsgLinks(ml *msgLinks) {
	t.ml = ml
	t.rcMsgBufs.Store(true)
	t.eng.fds[3].Fd = int32(ml.cq.ChannelFD())
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
// (engine: nothing refers to it any more).
func (t *Transport) freeMsgQP(qp *ibv.QP) {
	if qp == nil {
		return
	}
	t.offload(func() {
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

// sendMsg sends an application message (engine, t.mu held): over the
// peer's message link if the ordering rule allows it (see msgLinks), else
// over the reliable UD channel, asking for a link if m is above one
// datagram. own says m is the engine's own copy.
func (t *Transport) sendMsg(to ranks.Rank, m []byte, own bool, now int64) error {
	if t.ml != nil {
		if l := t.ml.links[to]; l != nil && l.up {
			if limit := t.rel.cfg.queueMax * t.rel.cfg.frag; l.bytes+len(m) > limit {
				// As much as the UD channel holds for a peer.
				return fmt.Errorf("verbs transport: message link to rank %d full (%d bytes unconfirmed; peer dead or slow)", to, l.bytes)
			}
			if !own {
				m = append([]byte(nil), m...)
			}
			t.ml.out[to]++
			l.queue = append(l.queue, &rcMsg{seq: t.ml.out[to], data: m})
			l.bytes += len(m)
			t.ml.clock++
			l.used = t.ml.clock
			t.rcPump(l)
			return nil
		}
	}
	if err := t.rel.send(to, false, m, now); err != nil {
		return err
	}
	if t.rcOn() && to != t.cfg.Self {
		if len(m) > t.rel.cfg.frag {
			t.rcWant(to, now, true)
		} else if t.hotPeer(to, now) {
			t.rcWant(to, now, false)
		}
	}
	return nil
}

// hotPeer counts a small message to peer over UD and says whether peer
// has become a frequent partner: rcHotMsgs messages within rcHotWindow
// (engine). A frequent partner gets a message link if the pool has room,
// as an RC SEND under soft-RoCE costs about half a UD one (a UD send
// schedules its completion outside the posting system call).
func (t *Transport) hotPeer(to ranks.Rank, now int64) bool {
	h := &t.hot[to]
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
func (t *Transport) rcPump(l *msgLink) {
	ml := t.ml
	if t.rel.pending(l.peer) > 0 {
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
				t.rcBreak(l, "posting a message SEND", err)
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

// pollRC handles the message links' completions (engine): send
// completions free buffers and confirm messages, receives are
// reassembled and delivered. It returns the number of completions.
func (t *Transport) pollRC() int {
	ml := t.ml
	total := 0
	for {
		n, err := ml.cq.Poll(ml.wcs)
		if err != nil {
			t.logLimited("rcpoll", slog.LevelError, "polling the message CQ", "err", err)
			return total
		}
		total += n
		for i := range ml.wcs[:n] {
			wc := &ml.wcs[i]
			if wc.WRID < uint64(srqDepth) { // sends carry a generation above bit 32
				t.onRCRecv(wc)
			} else {
				t.onRCSent(wc)
			}
		}
		if n < len(ml.wcs) {
			break
		}
	}
	if total > 0 {
		t.eng.traffic = true
	}
	return total
}

// pumpHeld posts the messages links held while the UD channel to their
// peer was not drained (engine, after each batch of acks).
func (t *Transport) pumpHeld() {
	ml := t.ml
	ml.held = false
	for _, l := range ml.links {
		if l.up && len(l.queue) > 0 {
			t.rcPump(l)
		}
	}
}

// onRCSent handles one send completion.
func (t *Transport) onRCSent(wc *ibv.WC) {
	ml := t.ml
	slot := int(wc.WRID & 0xffffffff)
	if slot >= srqDepth || ml.gen[slot] != uint32(wc.WRID>>32) || ml.owner[slot] == nil {
		return // a buffer already reclaimed by rcBreak
	}
	l := ml.owner[slot]
	ml.owner[slot] = nil
	ml.free = append(ml.free, slot)
	l.posted--
	if err := wc.Err(); err != nil {
		t.rcBreak(l, "message SEND failed", err)
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
		t.rcPump(l)
	}
}

// onRCRecv handles one receive completion from the shared receive queue.
func (t *Transport) onRCRecv(wc *ibv.WC) {
	ml := t.ml
	i := int(wc.WRID)
	defer func() {
		if err := ml.srq.PostRecv(uint64(i), ml.recvMR, i*rcBuf, rcBuf); err != nil {
			t.logLimited("srq", slog.LevelError, "reposting a shared receive", "err", err)
		}
	}()
	if err := wc.Err(); err != nil {
		if wc.Status != ibv.WCWRFlushErr {
			t.rcMsgErrors.Add(1)
			t.reject("rc_recv_error", err)
		}
		return
	}
	b := ml.recvMR.Bytes()[i*rcBuf : i*rcBuf+int(wc.ByteLen)]
	f, n, err := ml.rx.Decode(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%d bytes after a %d-byte frame", len(b)-n, n)
	}
	if err != nil {
		t.reject(reasonOr(err, "bad_rc_frame"), err)
		return
	}
	if l := ml.byQPN[wc.QPNum]; l != nil && l.peer != f.Sender {
		t.reject("wrong_rc_sender", fmt.Errorf("rank %d frame on the message link of rank %d", f.Sender, l.peer))
		return
	}
	if inc := t.peers[f.Sender].Inc; f.Incarnation != inc {
		// A link is set up with one incarnation of its peer.
		t.reject(wire.ReasonStale, fmt.Errorf("rank %d RC frame of incarnation %#x, the link's peer is %#x", f.Sender, f.Incarnation, inc))
		return
	}
	if f.Type != wire.Msg {
		t.reject("unexpected_type", fmt.Errorf("%s frame over RC", f.Type))
		return
	}
	flags, seq, size, chunk, err := decodeChunk(f.Payload)
	if err != nil {
		t.reject("bad_rc_chunk", err)
		return
	}
	p := &ml.part[f.Sender]
	if flags&rcFirst != 0 {
		if size > maxPayload {
			p.seq = 0
			t.reject("rc_too_large", fmt.Errorf("message of %d bytes from rank %d, above %d", size, f.Sender, maxPayload))
			return
		}
		p.seq, p.buf = seq, make([]byte, 0, size)
	} else if p.seq != seq {
		return // the rest of a message whose start went with a broken link
	}
	if len(p.buf)+len(chunk) > cap(p.buf) || (flags&rcLast != 0) != (len(p.buf)+len(chunk) == cap(p.buf)) {
		p.seq = 0
		t.reject("bad_rc_chunk", fmt.Errorf("rank %d: chunks of message %d do not add up to its %d bytes", f.Sender, seq, cap(p.buf)))
		return
	}
	p.buf = append(p.buf, chunk...)
	if flags&rcLast == 0 {
		return
	}
	m := p.buf
	p.seq, p.buf = 0, nil
	t.deliverRC(f.Sender, seq, m)
}

// deliverRC hands message seq from peer to the handler once.
func (t *Transport) deliverRC(from ranks.Rank, seq uint64, m []byte) {
	if seq <= t.ml.in[from] {
		return // already delivered (a RESEND of a message that did arrive)
	}
	t.ml.in[from] = seq
	t.ready = append(t.ready, delivery{from, m})
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
func (t *Transport) rcBreak(l *msgLink, why string, err error) {
	ml := t.ml
	if ml.links[l.peer] != l {
		return
	}
	if err != nil {
		t.rcMsgErrors.Add(1)
		t.logLimited("rcmsg", slog.LevelWarn, "message link broken: unconfirmed messages go again over UD", "peer", l.peer, "why", why, "err", err,
			"messages", len(l.queue))
	}
	t.dropLink(l)
	ml.retry[l.peer] = now() + int64(rcRetryAfter)
	for _, m := range l.queue {
		t.rcResend(l.peer, m)
	}
	l.queue, l.bytes = nil, 0
}

// dropLink removes l from the pool: nothing of it is posted again and its
// completions are ignored (its send buffers have no owner). Its QP is
// destroyed on the link worker (if the worker has it now, when its job
// comes back), and the send buffers it had posted come back to the pool
// once the QP is gone, not before: until then the device may still read
// them.
func (t *Transport) dropLink(l *msgLink) {
	ml := t.ml
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
	t.offload(func() {
		if err := t.closeMsgQP(qp); err != nil {
			t.logLimited("rcclose", slog.LevelWarn, "destroying a message QP", "peer", l.peer, "err", err)
		}
		if len(held) > 0 {
			t.toEngine(func() {
				if t.ml == ml {
					ml.free = append(ml.free, held...)
					t.pumpHeld() // links that waited for a buffer
				}
			}, func() {})
		}
	})
}

// rcResend sends message m again over the reliable UD channel.
func (t *Transport) rcResend(to ranks.Rank, m *rcMsg) {
	c := control{op: ctlMsgResend, seq: m.seq}
	b := c.append(make([]byte, 0, 1+8+len(m.data)))
	b = append(b, m.data...)
	if err := t.rel.send(to, true, b, now()); err != nil {
		t.msgsDropped.Add(1)
		t.logLimited("resend", slog.LevelWarn, "message dropped", "to", to, "err", err)
		return
	}
	t.rcResent.Add(1)
}

// rcWant asks peer to for a message link (engine). If the pool is full it
// evicts the least recently used idle link when evict is set (a message
// above one datagram), and otherwise asks nothing (a frequent partner).
func (t *Transport) rcWant(to ranks.Rank, now int64, evict bool) {
	if !t.startMsgLinks() {
		if t.mlMaking { // asked again once the pool exists
			if t.mlWanted == nil {
				t.mlWanted = map[ranks.Rank]bool{}
			}
			t.mlWanted[to] = t.mlWanted[to] || evict
		}
		return
	}
	ml := t.ml
	if l := ml.links[to]; l != nil {
		if !l.stale(now) {
			return
		}
		t.dropStale(l)
	}
	if now < ml.retry[to] {
		return
	}
	if full := len(ml.links) >= rcPool; full && (!evict || !t.rcRoom(to)) {
		return
	}
	// The link worker creates the QP, then the engine sends MSGREQ.
	l := t.newLink(to, false, 0)
	l.room = !evict
	t.offload(func() {
		qp, err := t.createMsgQP(ml, nil)
		t.toEngine(func() { t.sendMsgReq(l, qp, err) }, func() { t.closeMsgQP(qp) })
	})
}

// sendMsgReq takes the QP the link worker created for l and sends MSGREQ
// (engine).
func (t *Transport) sendMsgReq(l *msgLink, qp *ibv.QP, err error) {
	ml := t.ml
	if ml.links[l.peer] != l { // dropped meanwhile (a restart, the peer's request won)
		t.freeMsgQP(qp)
		return
	}
	if err == nil {
		l.qp, l.qpn = qp, qp.Num()
		ml.byQPN[l.qpn] = l
		op := byte(ctlMsgReq)
		if l.room {
			op = ctlMsgReqRoom
		}
		err = t.rel.send(l.peer, true, control{op: op, ep: qp.Endpoint()}.append(nil), now())
	}
	if err != nil {
		t.dropLink(l)
		ml.retry[l.peer] = now() + int64(rcRetryAfter)
		t.logLimited("rcwant", slog.LevelWarn, "cannot start a message link", "peer", l.peer, "err", err)
	}
}

// rcRoom makes room in the pool for a link to peer: false if it is full
// of links that are busy (an unconfirmed message) or not yet up.
func (t *Transport) rcRoom(peer ranks.Rank) bool {
	ml := t.ml
	if len(ml.links) < rcPool {
		return true
	}
	tn := now()
	var lru *msgLink
	for _, l := range ml.links {
		switch {
		case l.peer == peer:
		case l.stale(tn): // a handshake that did not finish goes first
			t.dropStale(l)
			return true
		case l.up && len(l.queue) == 0 && (lru == nil || l.used < lru.used):
			lru = l
		}
	}
	if lru == nil {
		return false
	}
	t.rcEvicted.Add(1)
	t.pollRC() // what it brought is delivered before the peer resends
	if ml.links[lru.peer] != lru {
		return len(ml.links) < rcPool
	}
	if err := t.rel.send(lru.peer, true, control{op: ctlMsgClose, echo: lru.remote}.append(nil), now()); err != nil {
		t.logLimited("rcevict", slog.LevelWarn, "cannot tell an evicted peer", "peer", lru.peer, "err", err)
	}
	t.dropLink(lru)
	return true
}

// newLink takes a place in the pool for a link to peer, whose QP the
// link worker is to make (answer: for the peer's request from its QP
// remote).
func (t *Transport) newLink(peer ranks.Rank, answer bool, remote uint32) *msgLink {
	ml := t.ml
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
func (t *Transport) dropStale(l *msgLink) {
	t.logLimited("rcstale", slog.LevelInfo, "message link handshake did not finish: dropped", "peer", l.peer)
	if l.remote != 0 {
		t.refuse(l.peer, l.remote)
	}
	t.dropLink(l)
}

// onMsgReq answers a peer's MSGREQ (engine); a request with room set
// (MSGREQROOM, a frequent partner's) is refused rather than evict a link.
func (t *Transport) onMsgReq(from ranks.Rank, ep ibv.Endpoint, room bool) {
	if !t.rcOn() || from == t.cfg.Self {
		t.refuse(from, ep.QPN)
		return
	}
	if !t.startMsgLinks() {
		if !t.mlMaking { // making it failed lately
			t.refuse(from, ep.QPN)
			return
		}
		w := msgReqWaiting{from, ep, room}
		if i := slices.IndexFunc(t.mlWaiting, func(w msgReqWaiting) bool { return w.from == from }); i >= 0 {
			t.mlWaiting[i] = w // a newer request replaces the older
		} else {
			t.mlWaiting = append(t.mlWaiting, w)
		}
		return
	}
	ml := t.ml
	if l := ml.links[from]; l != nil {
		switch {
		case l.answer && l.remote == ep.QPN: // a repeated request
			if l.qp != nil {
				t.msgAck(from, l, ep.QPN)
			} // else: being answered
			return
		case !l.answer && !l.up && l.qpn != 0 && t.cfg.Self < from && !l.stale(now()):
			return // both asked: ours (sent) wins, the peer answers it
		default: // the peer dropped its end, or both asked and theirs wins
			t.rcBreak(l, "replaced by the peer's request", nil)
		}
	}
	if full := len(ml.links) >= rcPool; full && (room || !t.rcRoom(from)) {
		t.refuse(from, ep.QPN)
		return
	}
	// The link worker creates the QP and connects it, then the engine
	// answers MSGACK.
	l := t.newLink(from, true, ep.QPN)
	t.offload(func() {
		qp, err := t.createMsgQP(ml, &ep)
		t.toEngine(func() { t.msgAccepted(l, qp, err) }, func() { t.closeMsgQP(qp) })
	})
}

// msgAccepted takes the QP the link worker created and connected for the
// peer's request and answers MSGACK (engine). The link is up on the
// requester's MSGUP.
func (t *Transport) msgAccepted(l *msgLink, qp *ibv.QP, err error) {
	ml := t.ml
	if ml.links[l.peer] != l { // dropped meanwhile (a restart, a new request)
		t.freeMsgQP(qp)
		return
	}
	if err != nil {
		t.dropLink(l)
		t.logLimited("rcaccept", slog.LevelWarn, "cannot accept a message link", "peer", l.peer, "err", err)
		t.refuse(l.peer, l.remote)
		return
	}
	l.qp, l.qpn = qp, qp.Num()
	ml.byQPN[l.qpn] = l
	if t.msgAck(l.peer, l, l.remote) != nil {
		t.dropLink(l) // no MSGUP will come for it
	}
}

// msgAck answers the peer's request from QP echo with l's QP; an error is
// logged and returned.
func (t *Transport) msgAck(to ranks.Rank, l *msgLink, echo uint32) error {
	err := t.rel.send(to, true, control{op: ctlMsgAck, ep: l.qp.Endpoint(), echo: echo}.append(nil), now())
	if err != nil {
		t.logLimited("rcack", slog.LevelWarn, "cannot answer a message link request", "peer", to, "err", err)
	}
	return err
}

// refuse tells the peer to drop its end (QP number qpn).
func (t *Transport) refuse(to ranks.Rank, qpn uint32) {
	if err := t.rel.send(to, true, control{op: ctlMsgClose, echo: qpn}.append(nil), now()); err != nil {
		t.logLimited("rcrefuse", slog.LevelWarn, "cannot refuse a message link", "peer", to, "err", err)
	}
}

// onMsgAck has the link worker connect the requester's end (engine).
func (t *Transport) onMsgAck(from ranks.Rank, c control) {
	var l *msgLink
	if t.ml != nil {
		l = t.ml.links[from]
	}
	if l == nil || l.answer || l.up || l.qpn != c.echo {
		t.refuse(from, c.ep.QPN) // an answer to an attempt already dropped
		return
	}
	if l.qp == nil {
		return // being connected: a repeated answer
	}
	qp := l.qp
	l.qp, l.remote = nil, c.ep.QPN // the worker's until connected
	t.offload(func() {
		err := t.connectMsgQP(qp, c.ep)
		t.toEngine(func() { t.msgConnected(l, qp, err) }, func() { t.closeMsgQP(qp) })
	})
}

// msgConnected takes back the requester's QP the link worker connected:
// the link is up, and MSGUP tells the answerer (engine).
func (t *Transport) msgConnected(l *msgLink, qp *ibv.QP, err error) {
	if t.ml.links[l.peer] != l { // dropped meanwhile (a restart, MSGCLOSE)
		t.freeMsgQP(qp)
		return
	}
	l.qp = qp
	if err == nil {
		err = t.rel.send(l.peer, true, control{op: ctlMsgUp, ep: qp.Endpoint(), echo: l.remote}.append(nil), now())
	}
	if err != nil {
		t.rcBreak(l, "connecting a message link", err)
		t.refuse(l.peer, l.remote)
		return
	}
	l.up = true
	t.rcLinksUp.Add(1)
}

// onMsgUp puts the answerer's end in service once the requester's is
// connected (engine).
func (t *Transport) onMsgUp(from ranks.Rank, c control) {
	var l *msgLink
	if t.ml != nil {
		l = t.ml.links[from]
	}
	if l == nil || !l.answer || l.qp == nil || l.qpn != c.echo || l.remote != c.ep.QPN {
		t.refuse(from, c.ep.QPN) // for an end already dropped
		return
	}
	if !l.up {
		l.up = true
		t.rcLinksUp.Add(1)
	}
}

// onMsgClose drops the link whose local QP number the peer names.
func (t *Transport) onMsgClose(from ranks.Rank, qpn uint32) {
	if t.ml == nil {
		return
	}
	if l := t.ml.links[from]; l != nil && l.qpn != 0 && l.qpn == qpn {
		t.pollRC()
		if t.ml.links[from] == l {
			t.rcBreak(l, "closed by the peer", nil)
		}
	}
}

// onResend delivers a message the peer sent again over UD.
func (t *Transport) onResend(from ranks.Rank, seq uint64, m []byte) {
	if err := t.initMsgLinks(); err != nil {
		t.reject("rc_resend", err)
		return
	}
	t.deliverRC(from, seq, m)
}

// msgPeerGone drops the link to a peer the reliable layer gave up on:
// its unconfirmed messages are dropped and counted, as the UD ones are.
func (t *Transport) msgPeerGone(to ranks.Rank) {
	if t.ml == nil {
		return
	}
	if l := t.ml.links[to]; l != nil {
		t.msgsDropped.Add(uint64(len(l.queue)))
		l.queue, l.bytes = nil, 0
		t.dropLink(l)
		t.ml.retry[to] = now() + int64(rcRetryAfter)
	}
}

// msgPeerRestarted forgets what the message links knew of rank r's
// previous incarnation (peerRestarted): its link is dropped with the
// messages it still held (counted, as the UD ones are), and message
// numbers both ways start again.
func (t *Transport) msgPeerRestarted(r ranks.Rank) {
	t.mlWaiting = slices.DeleteFunc(t.mlWaiting, func(w msgReqWaiting) bool { return w.from == r })
	delete(t.mlWanted, r)
	if t.ml == nil {
		return
	}
	t.msgPeerGone(r)
	ml := t.ml
	ml.out[r], ml.in[r], ml.part[r], ml.retry[r] = 0, 0, rcPartial{}, 0
}

// msgLinkPeers returns the peers with a message link, sorted (tests).
func (t *Transport) msgLinkPeers() (up, pending []ranks.Rank) {
	if t.ml == nil {
		return nil, nil
	}
	for p, l := range t.ml.links {
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
