package verbs

import (
	"fmt"
	"sync/atomic"

	"github.com/vigil-hpc/vigil/ranks"
)

// reliable is the minimal reliability layer over UD datagrams: per peer,
// sequence numbers, a sliding window of unacknowledged packets retransmitted
// with exponential back-off, cumulative acks, in-order delivery with
// duplicate suppression, fragmentation of messages larger than one
// datagram, and giving up on a peer that never acks (it is dead or cut
// off: its messages are dropped and counted, as TCP's are, and the next
// packet's base tells the receiver to skip them).
//
// Acks are delayed, not lost: a DATA packet received in order only marks
// an ack as owed; every DATA packet sent carries the cumulative ack of its
// direction, which pays the debt for free (a reply acknowledges its
// request), and flushAcks, which the transport calls while it polls, sends
// a lone ACK for what has been owed for ackDelay (so that the next request
// of a ping-pong, usually sent sooner, carries it), and for everything
// owed before the transport sleeps.
// Duplicates and out-of-order packets are acked at once, and so is every
// window/2-th packet of a long burst.
//
// It is pure state: time comes in as nanoseconds, datagrams go out through
// xmit and messages come out through deliver. The transport drives it from
// one goroutine.
type reliable struct {
	cfg     relConfig
	peers   map[ranks.Rank]*peerRel
	owed    []ranks.Rank                              // peers with ackOwed set, in the order they became so
	sent    bool                                      // DATA transmitted since the driver last cleared it
	xmit    func(to ranks.Rank, payload []byte)       // send one Msg-frame payload
	deliver func(from ranks.Rank, ctl bool, m []byte) // a whole message, in order
	gaveUp  func(to ranks.Rank, msgs int)             // msgs dropped towards to
	// duplicate, if set, is told of each DATA packet whose seq was
	// delivered or is already held: a retransmission after a lost ack,
	// or a replay.
	duplicate func(from ranks.Rank, seq uint64)
	scratch   []byte
	resent    atomic.Uint64 // retransmissions (read by VerbsStats)
}

// maxPayload is the largest message Send takes; the layer carries
// ctlHeadroom bytes more, so that a message sent again with a control
// header (an RC message link's RESEND) still fits.
const (
	maxPayload  = 1 << 20
	ctlHeadroom = 64
)

// relConfig are the layer's knobs (see defaultRelConfig).
type relConfig struct {
	window   int   // packets in flight per peer
	queueMax int   // packets waiting for the window per peer
	frag     int   // fragment bytes per datagram
	maxMsg   int   // largest message
	rto0     int64 // shortest retransmission timeout (ns)
	rtoMax   int64 // back-off cap (ns)
	maxTries int   // transmissions of one packet before giving up
}

// defaultRelConfig: an RTO of at least 20 ms (well above a RoCE round
// trip, and above soft-RoCE's under emulation when idle), raised to the
// measured round trip plus four deviations (RFC 6298) where the path is
// slower, doubling to 640 ms, 10 tries: a peer is given up after ≈ 4 s
// (longer on a slow path).
func defaultRelConfig(frag int) relConfig {
	return relConfig{window: 32, queueMax: 4096, frag: frag, maxMsg: maxPayload + ctlHeadroom,
		rto0: 20e6, rtoMax: 640e6, maxTries: 10}
}

// peerRel is the state towards and from one peer.
type peerRel struct {
	// Send side.
	next     uint64    // seq of the next new packet (from 1)
	base     uint64    // lowest seq not yet acked or abandoned
	inflight []*packet // seq base.., at most window
	queue    []*packet // waiting for the window
	// srtt and rttvar estimate the round trip, packet sent to its ack
	// received (ns; srtt 0: no sample yet); rto is the timeout they give.
	srtt, rttvar, rto int64
	// Receive side.
	expected uint64 // next seq to deliver
	ooo      map[uint64]rpacket
	partial  []byte
	partCtl  bool
	ackOwed  bool  // in-order packets received since the last ack sent
	unacked  int   // how many
	ackSince int64 // when ackOwed was set (ns)
}

type packet struct {
	seq   uint64
	flags byte
	frag  []byte
	sent  int64 // first transmission time
	due   int64 // next (re)transmission time; 0: not sent yet
	rto   int64
	tries int
}

type rpacket struct {
	flags byte
	frag  []byte
}

func newReliable(cfg relConfig) *reliable {
	return &reliable{cfg: cfg, peers: map[ranks.Rank]*peerRel{}}
}

func (r *reliable) peer(p ranks.Rank) *peerRel {
	s := r.peers[p]
	if s == nil {
		s = &peerRel{next: 1, base: 1, expected: 1}
		r.peers[p] = s
	}
	return s
}

// send queues message m to peer to (split into fragments) and transmits
// what the window allows. It fails if m is too large or the peer's queue
// is full (the message is then dropped whole).
func (r *reliable) send(to ranks.Rank, ctl bool, m []byte, now int64) error {
	if len(m) > r.cfg.maxMsg {
		return fmt.Errorf("verbs transport: message of %d bytes above %d", len(m), r.cfg.maxMsg)
	}
	s := r.peer(to)
	nfrag := max(1, (len(m)+r.cfg.frag-1)/r.cfg.frag)
	if len(s.queue)+nfrag > r.cfg.queueMax {
		return fmt.Errorf("verbs transport: send queue to rank %d full (%d packets unacknowledged; peer dead or slow)", to, len(s.queue)+len(s.inflight))
	}
	for i := 0; i < nfrag; i++ {
		var flags byte
		if ctl {
			flags |= flagControl
		}
		if i == nfrag-1 {
			flags |= flagLast
		}
		end := min(len(m), (i+1)*r.cfg.frag)
		frag := append([]byte(nil), m[i*r.cfg.frag:end]...)
		s.queue = append(s.queue, &packet{seq: s.next, flags: flags, frag: frag})
		s.next++
	}
	r.pump(to, s, now)
	return nil
}

// pump moves queued packets into the window and sends them.
func (r *reliable) pump(to ranks.Rank, s *peerRel, now int64) {
	for len(s.queue) > 0 && len(s.inflight) < r.cfg.window {
		p := s.queue[0]
		s.queue = s.queue[1:]
		s.inflight = append(s.inflight, p)
		r.transmit(to, s, p, now)
	}
	if len(s.queue) == 0 {
		s.queue = nil
	}
}

func (r *reliable) transmit(to ranks.Rank, s *peerRel, p *packet, now int64) {
	if p.rto == 0 {
		p.rto = max(r.cfg.rto0, s.rto)
		p.sent = now
	} else {
		p.rto = min(2*p.rto, r.cfg.rtoMax)
	}
	p.tries++
	if p.tries > 1 {
		r.resent.Add(1)
	}
	p.due = now + p.rto
	r.scratch = appendData(r.scratch[:0], p.flags, p.seq, s.base, s.expected-1, p.frag)
	s.ackOwed, s.unacked = false, 0
	r.sent = true
	r.xmit(to, r.scratch)
}

// sendAck sends a lone cumulative ACK to peer.
func (r *reliable) sendAck(to ranks.Rank, s *peerRel) {
	s.ackOwed, s.unacked = false, 0
	r.scratch = appendAck(r.scratch[:0], s.expected-1)
	r.xmit(to, r.scratch)
}

// ackDelay is how long an ack may wait for a DATA packet to carry it
// while the transport polls: far below the first retransmission timeout,
// above the time a ping-pong's next request takes to follow its reply.
const ackDelay = 200e3 // ns

// flushAcks sends a lone ACK to every peer owed one (no DATA packet carried
// it since) for at least delay ns at time now; delay 0 flushes them all.
func (r *reliable) flushAcks(now, delay int64) {
	keep := r.owed[:0]
	for _, p := range r.owed {
		s := r.peers[p]
		switch {
		case s == nil || !s.ackOwed:
		case delay <= 0 || now-s.ackSince >= delay:
			r.sendAck(p, s)
		default:
			keep = append(keep, p)
		}
	}
	r.owed = keep
}

// onAck handles a cumulative ack from peer: every packet up to cum is
// delivered.
func (r *reliable) onAck(from ranks.Rank, cum uint64, now int64) {
	s := r.peers[from]
	if s == nil || cum < s.base {
		return
	}
	if cum >= s.next { // acks a packet never sent: ignore the bogus part
		cum = s.next - 1
	}
	i := 0
	for i < len(s.inflight) && s.inflight[i].seq <= cum {
		i++
	}
	// Karn: only packets sent once time the round trip, and only when
	// none acked with them was resent (a gap holds the cumulative ack
	// back: the later packets' acks come late).
	clean := i > 0 && now > s.inflight[i-1].sent
	for _, p := range s.inflight[:i] {
		clean = clean && p.tries == 1
	}
	if clean {
		r.sample(s, now-s.inflight[i-1].sent)
	}
	s.inflight = s.inflight[i:]
	s.base = cum + 1
	r.pump(from, s, now)
}

// sample takes one round-trip measurement rtt into the peer's estimate
// and timeout (RFC 6298: srtt + 4·rttvar, at least rto0, at most rtoMax).
func (r *reliable) sample(s *peerRel, rtt int64) {
	if s.srtt == 0 {
		s.srtt, s.rttvar = rtt, rtt/2
	} else {
		d := s.srtt - rtt
		if d < 0 {
			d = -d
		}
		s.rttvar += (d - s.rttvar) / 4
		s.srtt += (rtt - s.srtt) / 8
	}
	s.rto = min(max(r.cfg.rto0, s.srtt+4*s.rttvar), r.cfg.rtoMax)
}

// onData handles a DATA packet from peer: take its piggybacked ack, ack
// it (now or owed), reorder, deliver whole messages in order exactly once.
func (r *reliable) onData(from ranks.Rank, h pktHeader, frag []byte, now int64) {
	s := r.peer(from)
	if h.ack > 0 {
		r.onAck(from, h.ack, now)
	}
	if h.base > s.expected {
		// The sender gave up on [expected, base): skip them.
		s.expected, s.partial = h.base, nil
		for q := range s.ooo {
			if q < h.base {
				delete(s.ooo, q)
			}
		}
	}
	inOrder := false
	switch {
	case h.seq < s.expected: // duplicate: re-ack below
		r.dup(from, h.seq)
	case h.seq == s.expected:
		inOrder = true
		r.accept(from, s, h.flags, frag)
		for {
			p, ok := s.ooo[s.expected]
			if !ok {
				break
			}
			delete(s.ooo, s.expected)
			r.accept(from, s, p.flags, p.frag)
		}
	case h.seq < s.expected+uint64(2*r.cfg.window):
		if s.ooo == nil {
			s.ooo = map[uint64]rpacket{}
		}
		if _, dup := s.ooo[h.seq]; !dup {
			s.ooo[h.seq] = rpacket{h.flags, append([]byte(nil), frag...)}
		} else {
			r.dup(from, h.seq)
		}
	default: // beyond any window the sender may use: drop, it will resend
	}
	if !inOrder || len(s.ooo) > 0 || s.unacked+1 >= max(1, r.cfg.window/2) {
		r.sendAck(from, s) // tell the sender now what is missing, or open its window
		return
	}
	s.unacked++
	if !s.ackOwed {
		s.ackOwed, s.ackSince = true, now
		r.owed = append(r.owed, from)
	}
}

func (r *reliable) dup(from ranks.Rank, seq uint64) {
	if r.duplicate != nil {
		r.duplicate(from, seq)
	}
}

// accept appends the in-order fragment at s.expected and delivers a
// message on its last fragment.
func (r *reliable) accept(from ranks.Rank, s *peerRel, flags byte, frag []byte) {
	s.expected++
	if len(s.partial)+len(frag) > r.cfg.maxMsg {
		s.partial = nil // a sender over the limit: drop the message
		return
	}
	if len(s.partial) == 0 {
		s.partCtl = flags&flagControl != 0
	}
	s.partial = append(s.partial, frag...)
	if flags&flagLast != 0 {
		m := s.partial
		s.partial = nil
		r.deliver(from, s.partCtl, m)
	}
}

// tick handles the timeouts and returns the next deadline (0: nothing in
// flight). A peer whose oldest packet used all its tries is given up.
// Otherwise, at the oldest unacked packet's first timeout only that packet
// is sent again (the other expired timers restart): a late ack, the common
// case on a loaded host, then costs one datagram, not a window of them,
// since the receiver answers a duplicate with its cumulative ack at once.
// From its second timeout on (the path does lose packets), every expired
// packet is resent.
func (r *reliable) tick(now int64) int64 {
	next := int64(0)
	for to, s := range r.peers {
		if len(s.inflight) == 0 {
			continue
		}
		if p := s.inflight[0]; p.due <= now && p.tries >= r.cfg.maxTries {
			r.abandon(to, s)
			continue
		}
		if p := s.inflight[0]; p.due <= now {
			// The oldest packet's second timeout or later: the path
			// loses packets; every expired one goes again.
			all := p.tries >= 2
			r.transmit(to, s, p, now)
			// Karn: the backed-off timeout holds for new packets until
			// one acked without a retransmission measures the path.
			s.rto = max(s.rto, p.rto)
			for _, p := range s.inflight[1:] {
				switch {
				case p.due > now:
				case all:
					r.transmit(to, s, p, now)
				default:
					p.due = now + p.rto
				}
			}
		}
		for _, p := range s.inflight {
			if next == 0 || p.due < next {
				next = p.due
			}
		}
	}
	return next
}

// abandon drops everything towards a peer that stopped acking.
func (r *reliable) abandon(to ranks.Rank, s *peerRel) {
	msgs := 0
	for _, q := range [][]*packet{s.inflight, s.queue} {
		for _, p := range q {
			if p.flags&flagLast != 0 {
				msgs++
			}
		}
	}
	s.inflight, s.queue = nil, nil
	s.base = s.next
	if r.gaveUp != nil {
		r.gaveUp(to, msgs)
	}
}

// reset forgets everything towards and from peer p (it restarted: its next
// incarnation numbers its packets from 1 again, and so do we towards it).
// It returns the number of messages dropped towards p.
func (r *reliable) reset(p ranks.Rank) int {
	s := r.peers[p]
	if s == nil {
		return 0
	}
	msgs := 0
	for _, q := range [][]*packet{s.inflight, s.queue} {
		for _, pk := range q {
			if pk.flags&flagLast != 0 {
				msgs++
			}
		}
	}
	delete(r.peers, p)
	return msgs
}

// pending returns the number of packets held towards peer.
func (r *reliable) pending(to ranks.Rank) int {
	s := r.peers[to]
	if s == nil {
		return 0
	}
	return len(s.inflight) + len(s.queue)
}
