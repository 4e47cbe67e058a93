// Package tcp is Vigil's commodity transport: authenticated frames
// (package internal/wire) over TCP, for clusters without RDMA.
//
// Messages use one connection per destination, opened lazily and fed by a
// bounded per-peer queue that one writer goroutine drains: Send copies the
// payload, never blocks, and drops (counting) when the queue is full. The
// accepting end sends a random challenge to which every frame of the
// connection is bound, with its index, so that no frame or session can be
// replayed; the dialer's first frame is a Hello naming its rank and
// incarnation. A failed dial drops what was queued, and the next waits for
// an exponential backoff that only a new message starts: a dead peer costs
// nothing while nobody talks to it. A goroutine blocked in Read on each
// connection we open sees the peer close it, so the next send redials; a
// Hello from a newer incarnation of a rank drops our connections to it.
//
// Heartbeats are UDP datagrams to the listener's port (udp.go), one sendto
// of a pre-encoded frame each, which wakes nothing in the observer's
// process: they wait in a socket until the observer's check drains them
// (DrainHeartbeats), checks them like any frame and stores their sequence
// numbers into Config.Slots. The watched emitter has a socket of its own,
// connect()ed to it (WatchHeartbeats), so that a flood at the port cannot
// hide its heartbeats. A heartbeat names its receiver's rank and
// incarnation and must move the emitter's word forwards.
//
// Every frame is authenticated and checked (job, known rank, Hello first,
// incarnation not stale) before it is used; a rejected one is counted by
// reason in Stats().Rejected, logged at most once per second per reason,
// and closes its connection (a rejected datagram is dropped). What an
// outsider can and cannot do to this transport is in docs/security.md.
//
// Close closes the listener and every connection and waits for every
// goroutine of the transport.
package tcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/limit"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// Redial backoff bounds.
const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = 2 * time.Second
	// maxBatch is the most bytes of queued frames the writer gathers into
	// one write.
	maxBatch = 64 << 10
	// readBuf is the read buffer of one incoming connection.
	readBuf = 8 << 10
)

// Transport is the TCP transport; it implements transport.Transport.
type Transport struct {
	cfg    Config
	params wire.Params
	log    *slog.Logger
	ln     net.Listener
	incs   *wire.Incarnations
	peers  atomic.Pointer[[]string]
	dialer net.Dialer
	ctx    context.Context // cancelled by Close: aborts dials
	cancel context.CancelFunc
	done   chan struct{} // closed by Close: stops writers
	closed atomic.Bool
	wg     sync.WaitGroup

	mu   sync.Mutex // guards out, in, stop
	out  map[ranks.Rank]*peer
	in   map[net.Conn]struct{} // incoming connections
	stop bool                  // set under mu by Close: no new goroutines
	// pending holds the incoming connections without a Hello yet
	// (MaxPending caps them, the oldest evicted).
	pending *limit.Pending

	hb      *hbSocket            // heartbeats (udp.go)
	hbFrame *wire.HeartbeatFrame // the emitter thread's
	// announced[r] is when this rank last told rank r its incarnation
	// (announce), in time.Now nanoseconds; rebind is told when the
	// newest incarnation known of a rank changed (SetHeartbeatRebind).
	announced []atomic.Int64
	rebind    atomic.Pointer[func(ranks.Rank)]
	annMu     sync.Mutex  // guards annCodec, annBuf: the drain and the node's loop announce
	annCodec  *wire.Codec // announce's
	annBuf    []byte

	msgsSent, msgsRecv, bytesSent, bytesRecv atomic.Uint64
	hbSent, hbRecv, msgsDropped, hbDropped   atomic.Uint64

	rejMu    sync.Mutex
	rejected map[string]uint64
	lastLog  map[string]time.Time
	muted    map[string]uint64 // log lines suppressed since the last one, by key
}

// Listen validates cfg, listens on cfg.ListenAddr and starts accepting
// connections. Call SetPeers before sending.
func Listen(cfg Config) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	params := wire.Params{
		JobID: cfg.JobID, Key: cfg.Key, Rank: cfg.Self, Incarnation: cfg.Incarnation,
		N: cfg.N, MaxPayload: cfg.MaxPayload,
	}
	ln, hb, err := listen(cfg.ListenAddr, wire.NewCodec(params))
	if err != nil {
		return nil, err
	}
	t := &Transport{
		cfg:       cfg,
		params:    params,
		ln:        ln,
		hb:        hb,
		incs:      wire.NewIncarnations(cfg.N),
		announced: make([]atomic.Int64, cfg.N),
		dialer:    net.Dialer{Timeout: cfg.DialTimeout},
		done:      make(chan struct{}),
		out:       make(map[ranks.Rank]*peer),
		in:        make(map[net.Conn]struct{}),
		pending:   limit.NewPending(cfg.MaxPending),
		rejected:  make(map[string]uint64),
		lastLog:   make(map[string]time.Time),
		muted:     make(map[string]uint64),
	}
	t.log = cfg.Logger.With("rank", cfg.Self)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.hbFrame = wire.NewCodec(t.params).NewHeartbeatFrame()
	t.annCodec = wire.NewCodec(t.params)
	t.wg.Add(1)
	go t.acceptLoop()
	return t, nil
}

// listen opens the TCP listener and the heartbeat socket on the same
// address and port. With port 0 it retries when the kernel's TCP port is
// taken for UDP.
func listen(addr string, codec *wire.Codec) (net.Listener, *hbSocket, error) {
	for try := 0; ; try++ {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, nil, fmt.Errorf("tcp: listen: %w", err)
		}
		hb, err := openHBSocket(ln.Addr().(*net.TCPAddr), codec)
		if err == nil {
			return ln, hb, nil
		}
		ln.Close()
		if _, port, _ := net.SplitHostPort(addr); port != "0" || try == 8 {
			return nil, nil, err
		}
	}
}

// Addr returns the address the transport listens on.
func (t *Transport) Addr() string { return t.ln.Addr().String() }

// Incarnation returns the incarnation this transport announces.
func (t *Transport) Incarnation() uint64 { return t.cfg.Incarnation }

// SetPeers sets the address table, indexed by rank (this rank's own entry
// included, used by sends to self). An empty address marks a rank as not
// reachable yet. It may be called again, for instance after a peer
// restarted elsewhere; open connections are kept.
func (t *Transport) SetPeers(addrs []string) error {
	if len(addrs) != t.cfg.N {
		return fmt.Errorf("tcp: SetPeers: %d addresses for N=%d ranks", len(addrs), t.cfg.N)
	}
	for i, a := range addrs {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("tcp: SetPeers: rank %d: %w", i, err)
		}
	}
	if err := t.hb.setPeers(addrs); err != nil {
		return err
	}
	cp := append([]string(nil), addrs...)
	t.peers.Store(&cp)
	return nil
}

func (t *Transport) addr(r ranks.Rank) string {
	p := t.peers.Load()
	if p == nil {
		return ""
	}
	return (*p)[r]
}

// Send implements transport.Transport. The payload is copied; the call
// never blocks. Messages are dropped (and counted in Stats().MsgsDropped)
// when the peer's queue is full or the peer cannot be reached.
func (t *Transport) Send(to ranks.Rank, payload []byte) error {
	if t.closed.Load() {
		return transport.ErrClosed
	}
	if int64(to) >= int64(t.cfg.N) {
		return transport.ErrUnknownRank
	}
	if len(payload) > t.cfg.MaxPayload {
		return transport.ErrTooLarge
	}
	p := t.peer(to)
	if p == nil {
		return transport.ErrClosed
	}
	select {
	case p.q <- append([]byte(nil), payload...):
	default:
		t.msgsDropped.Add(1)
	}
	return nil
}

// peer returns the outgoing state for rank r, starting its writer on first
// use; nil once the transport is closing.
func (t *Transport) peer(r ranks.Rank) *peer {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stop {
		return nil
	}
	p := t.out[r]
	if p == nil {
		p = &peer{t: t, rank: r, q: make(chan []byte, t.cfg.QueueLen), codec: wire.NewCodec(t.params)}
		t.out[r] = p
		t.wg.Add(1)
		go p.run()
	}
	return p
}

// dial opens a connection to rank r, sends the Hello with codec and
// starts a goroutine that waits for the connection to end: past the
// challenge, peers never write on the connections we open, so any return
// from Read means the peer closed or reset it, and gone(c) makes the next send redial instead of
// writing into a dead socket. The caller must be a goroutine counted in
// t.wg.
func (t *Transport) dial(r ranks.Rank, codec *wire.Codec, gone func(net.Conn)) (net.Conn, error) {
	addr := t.addr(r)
	if addr == "" {
		return nil, fmt.Errorf("no address for rank %d", r)
	}
	c, err := t.dialer.DialContext(t.ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	// The accepting end speaks first: the connection's challenge, which
	// every frame we send on it is bound to (no replay across connections).
	var ch wire.Challenge
	_ = c.SetReadDeadline(time.Now().Add(t.cfg.DialTimeout))
	if _, err := io.ReadFull(c, ch[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("reading rank %d's challenge: %w", r, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	codec.Bind(ch)
	hello, err := codec.Append(nil, wire.Hello, wire.AppendHello(nil, r))
	if err == nil {
		_ = c.SetWriteDeadline(time.Now().Add(t.cfg.DialTimeout))
		_, err = c.Write(hello)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		var b [1]byte
		_, _ = c.Read(b[:])
		gone(c)
		c.Close()
	}()
	return c, nil
}

// peer is the message path to one rank: a queue and its writer goroutine.
type peer struct {
	t     *Transport
	rank  ranks.Rank
	q     chan []byte
	reset atomic.Bool // set when the peer restarted: drop the connection

	mu   sync.Mutex // guards conn against Close
	conn net.Conn

	// Owned by the writer goroutine.
	codec   *wire.Codec
	buf     []byte
	backoff time.Duration
	retryAt time.Time
}

func (p *peer) setConn(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c != nil && p.t.closed.Load() {
		c.Close()
		return false
	}
	if p.conn != nil && p.conn != c {
		p.conn.Close()
	}
	p.conn = c
	return true
}

// gone forgets c if it is still the peer's connection.
func (p *peer) gone(c net.Conn) {
	p.mu.Lock()
	if p.conn == c {
		p.conn = nil
	}
	p.mu.Unlock()
}

func (p *peer) closeConn() {
	p.mu.Lock()
	if p.conn != nil {
		p.conn.Close()
		p.conn = nil
	}
	p.mu.Unlock()
}

// run is the peer's writer goroutine.
func (p *peer) run() {
	t := p.t
	defer t.wg.Done()
	defer p.closeConn()
	var batch [][]byte
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case m := <-p.q:
			batch = append(batch[:0], m)
		case <-t.done:
			return
		}
		size := len(batch[0])
	gather:
		for size < maxBatch {
			select {
			case m := <-p.q:
				batch = append(batch, m)
				size += len(m)
			default:
				break gather
			}
		}
		if p.reset.Swap(false) {
			p.closeConn()
		}
		p.mu.Lock()
		conn := p.conn
		p.mu.Unlock()
		if conn == nil {
			if wait := time.Until(p.retryAt); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-t.done:
					return
				}
			}
			c, err := t.dial(p.rank, p.codec, p.gone)
			if err != nil || !p.setConn(c) {
				if t.closed.Load() {
					return
				}
				p.backoff = min(max(2*p.backoff, minBackoff), maxBackoff)
				p.retryAt = time.Now().Add(p.backoff)
				n := len(batch) + p.drain()
				t.msgsDropped.Add(uint64(n))
				t.logLimited("dial", slog.LevelInfo, "tcp: cannot reach peer; messages dropped",
					"peer", p.rank, "dropped", n, "retry_in", p.backoff, "err", err)
				continue
			}
			p.backoff = 0
			conn = c
		}
		p.buf = p.buf[:0]
		var bytes int
		for _, m := range batch {
			p.buf, _ = p.codec.Append(p.buf, wire.Msg, m) // sizes checked by Send
			bytes += len(m)
		}
		clear(batch)
		_ = conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		if _, err := conn.Write(p.buf); err != nil {
			p.closeConn()
			t.msgsDropped.Add(uint64(len(batch)))
			if !t.closed.Load() {
				t.logLimited("write", slog.LevelInfo, "tcp: write to peer failed; messages dropped",
					"peer", p.rank, "dropped", len(batch), "err", err)
			}
			continue
		}
		t.msgsSent.Add(uint64(len(batch)))
		t.bytesSent.Add(uint64(bytes))
		if cap(p.buf) > 4*maxBatch {
			p.buf = nil // do not pin a one-off large buffer
		}
	}
}

// drain drops the queued messages and returns how many there were.
func (p *peer) drain() int {
	for n := 0; ; n++ {
		select {
		case <-p.q:
		default:
			return n
		}
	}
}

// SendHeartbeat implements transport.Transport: one authenticated datagram
// to rank to, bound to the newest incarnation of to this rank knows (0
// before it knows one: to then refuses it and announces its own), sent
// with one sendto from a pre-encoded frame; it does not allocate and never
// blocks. A heartbeat that cannot go out (address not known yet, full
// socket buffer) is dropped and counted in Stats().HeartbeatsDropped, not
// returned.
func (t *Transport) SendHeartbeat(to ranks.Rank, seq uint64) error {
	if int64(to) >= int64(t.cfg.N) {
		return transport.ErrUnknownRank
	}
	t.hbFrame.Bind(to, t.incs.Latest(to))
	if err := t.hb.send(to, t.hbFrame.Encode(seq)); err != nil {
		if errors.Is(err, net.ErrClosed) {
			return transport.ErrClosed
		}
		t.hbDropped.Add(1)
		return nil
	}
	t.hbSent.Add(1)
	return nil
}

// DrainHeartbeats implements transport.Drainer: it stores every
// authenticated heartbeat waiting in the watched emitter's socket, then in
// the port's, into the slots and counts the datagrams it rejects; at most
// drainBudget batches from each, whatever is waiting. Call it from one
// goroutine at a time (the heartbeat thread); it does not block.
func (t *Transport) DrainHeartbeats() {
	t.drain(true)
	t.drain(false)
}

// SweepHeartbeats implements transport.HeartbeatLanes: DrainHeartbeats
// of the port's socket only.
func (t *Transport) SweepHeartbeats() { t.drain(false) }

func (t *Transport) drain(lane bool) {
	for range drainBudget {
		n := t.hb.recv(lane)
		for i := range n {
			t.gotHeartbeat(t.hb.datagram(i))
		}
		if n < drainBatch {
			return
		}
	}
}

// WatchHeartbeats implements transport.HeartbeatLanes: from now on the
// kernel queues rank from's heartbeats in a socket of their own (the
// watched lane, HeartbeatFD), connect()ed to from's address: no other
// sender's datagram reaches it, and no flood of the port drops them.
func (t *Transport) WatchHeartbeats(from ranks.Rank) {
	r := int64(from)
	if r >= int64(t.cfg.N) {
		r = -1
	}
	if err := t.hb.watch(r, t.laneFilterFor(r)); err != nil {
		t.logLimited("watch", slog.LevelWarn, "tcp: connecting the watched emitter's heartbeat socket", "emitter", from, "err", err)
	}
	if r >= 0 && from != t.cfg.Self {
		t.announce(from) // at once: its first heartbeats need not wait for a refusal
	}
}

// HeartbeatLaneDrops implements transport.LaneDrops: the datagrams the
// kernel dropped at the watched emitter's socket, its buffer full or
// refused by its filter (forged datagrams: the emitter alone sends there
// at one per period).
func (t *Transport) HeartbeatLaneDrops() uint64 { return t.hb.laneDrops() }

// HeartbeatSweepFD implements transport.HeartbeatLanes: the socket of the
// port's other datagrams (-1 once closed).
func (t *Transport) HeartbeatSweepFD() int {
	t.hb.mu.RLock()
	defer t.hb.mu.RUnlock()
	return t.hb.fd
}

// SetHeartbeatRebind implements transport.HeartbeatLanes: f is called
// with rank r when the newest incarnation this rank knows of r changed,
// from a transport goroutine or the drain: heartbeats signed in advance
// for r are bound to the previous one.
func (t *Transport) SetHeartbeatRebind(f func(ranks.Rank)) { t.rebind.Store(&f) }

// laneFilterFor is the watched lane's filter for emitter r (nil for none,
// or this rank itself: the placeholder).
func (t *Transport) laneFilterFor(r int64) []unix.SockFilter {
	if r < 0 || r == int64(t.cfg.Self) {
		return nil
	}
	return laneFilter(t.cfg.JobID, ranks.Rank(r), t.incs.Latest(ranks.Rank(r)))
}

func (t *Transport) rebound(r ranks.Rank) {
	if err := t.hb.refilter(int64(r), t.laneFilterFor(int64(r))); err != nil { // its new incarnation
		t.logLimited("watch", slog.LevelWarn, "tcp: the watched emitter's heartbeat socket: its filter", "emitter", r, "err", err)
	}
	if f := t.rebind.Load(); f != nil && *f != nil {
		(*f)(r)
	}
}

// HeartbeatDest implements transport.Datagrams.
func (t *Transport) HeartbeatDest(to ranks.Rank) (fd int, addr []byte, ok bool) {
	return t.hb.dest(to)
}

// HeartbeatSigner implements transport.Datagrams: frames bound to the
// newest incarnation of their receiver known at signing.
func (t *Transport) HeartbeatSigner() func(dst []byte, to ranks.Rank, seq uint64) int {
	f := wire.NewCodec(t.params).NewHeartbeatFrame()
	return func(dst []byte, to ranks.Rank, seq uint64) int {
		f.Bind(to, t.incs.Latest(to))
		return copy(dst, f.Encode(seq))
	}
}

// HeartbeatFD implements transport.HeartbeatFD: the socket the watched
// emitter's heartbeats wait in (WatchHeartbeats; -1 once closed).
func (t *Transport) HeartbeatFD() int {
	t.hb.mu.RLock()
	defer t.hb.mu.RUnlock()
	return t.hb.lane
}

// HeartbeatExpected implements transport.HeartbeatVerifier: rank from's
// heartbeat frames of incarnation inc to this incarnation of this rank,
// as its SendHeartbeat encodes them.
func (t *Transport) HeartbeatExpected(from ranks.Rank, inc uint64) (func(dst []byte, seq uint64) int, int, *uint64) {
	if int64(from) >= int64(t.cfg.N) || int64(from) >= int64(t.cfg.Slots.Len()) {
		return nil, 0, nil
	}
	p := t.params
	p.Rank, p.Incarnation = from, inc
	f := wire.NewCodec(p).NewHeartbeatFrame()
	f.Bind(t.cfg.Self, t.cfg.Incarnation)
	return func(dst []byte, seq uint64) int { return copy(dst, f.Encode(seq)) }, wire.HeartbeatSeqAt, t.cfg.Slots.Word(from)
}

// HeartbeatDatagram implements transport.HeartbeatVerifier.
func (t *Transport) HeartbeatDatagram(b []byte) (ranks.Rank, uint64, bool) {
	return t.gotHeartbeat(b)
}

// gotHeartbeat checks one datagram and stores its sequence number; it
// returns the sender and incarnation of an authentic heartbeat that moved
// its word. A heartbeat must be meant for this rank (wrong_receiver) and
// this incarnation of it (wrong_incarnation, or unbound_heartbeat for
// none: the sender is then told the incarnation, see announce), come from the newest incarnation of its
// sender known (stale) and move the sender's word forwards
// (old_heartbeat). An incarnation announced by a peer (a Hello frame,
// announce) is recorded.
func (t *Transport) gotHeartbeat(b []byte) (ranks.Rank, uint64, bool) {
	f, n, err := t.hb.codec.Decode(b)
	reason := ""
	switch {
	case err != nil:
	case n != len(b):
		reason, err = wire.ReasonBadPayload, fmt.Errorf("datagram of %d bytes or more holds a frame of %d", len(b), n)
	case f.Type == wire.Hello:
		t.gotAnnounce(&f)
		return 0, 0, false
	case f.Type != wire.Heartbeat:
		reason, err = wire.ReasonBadType, fmt.Errorf("%v frame on the heartbeat socket", f.Type)
	case f.Incarnation < t.incs.Latest(f.Sender):
		reason, err = wire.ReasonStale, fmt.Errorf("heartbeat of rank %d from an old incarnation", f.Sender)
	}
	var beat wire.Beat
	if err == nil {
		beat, err = wire.DecodeHeartbeat(f.Payload)
	}
	switch {
	case err != nil:
	case beat.To != t.cfg.Self:
		reason, err = wire.ReasonWrongReceiver, fmt.Errorf("rank %d heartbeat for rank %d", f.Sender, beat.To)
	case beat.ToIncarnation == 0:
		reason, err = wire.ReasonUnbound, fmt.Errorf("rank %d heartbeat names no incarnation of this rank yet", f.Sender)
		t.announce(f.Sender)
	case beat.ToIncarnation != t.cfg.Incarnation:
		reason, err = wire.ReasonWrongIncarnation, fmt.Errorf("rank %d heartbeat for incarnation %#x of this rank, which is %#x",
			f.Sender, beat.ToIncarnation, t.cfg.Incarnation)
		t.announce(f.Sender)
	}
	if err != nil {
		if reason == "" {
			reason = wire.ReasonOf(err)
		}
		t.reject(reason, err, nil)
		return 0, 0, false
	}
	if newer, _ := t.incs.Observe(f.Sender, f.Incarnation); newer {
		t.rebound(f.Sender)
	}
	w := t.cfg.Slots.Word(f.Sender)
	for {
		old := atomic.LoadUint64(w)
		if beat.Seq <= old {
			t.reject(wire.ReasonOldHeartbeat, fmt.Errorf("rank %d heartbeat %d, its word is at %d", f.Sender, beat.Seq, old), nil)
			return 0, 0, false
		}
		if atomic.CompareAndSwapUint64(w, old, beat.Seq) {
			break
		}
	}
	t.hbRecv.Add(1)
	return f.Sender, f.Incarnation, true
}

// announceEvery is the least interval between two announcements of this
// rank's incarnation to one peer.
const announceEvery = 10 * time.Millisecond

// announce tells rank r this rank's incarnation, which its heartbeats do
// not name: one authenticated Hello datagram (naming r) to r's published
// address, never to the datagram's source, at most once per
// announceEvery per peer, so that replayed heartbeats make no flood. An
// observer announces itself when it starts watching an emitter, and again
// when a heartbeat of it names no incarnation or another one.
func (t *Transport) announce(r ranks.Rank) {
	if int64(r) >= int64(len(t.announced)) {
		return
	}
	now := time.Now().UnixNano()
	last := t.announced[r].Load()
	if now-last < int64(announceEvery) || !t.announced[r].CompareAndSwap(last, now) {
		return
	}
	t.annMu.Lock()
	var err error
	if t.annBuf, err = t.annCodec.Append(t.annBuf[:0], wire.Hello, wire.AppendHello(nil, r)); err == nil {
		err = t.hb.send(r, t.annBuf)
	}
	t.annMu.Unlock()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		t.logLimited("announce", slog.LevelInfo, "tcp: announcing this rank's incarnation", "peer", r, "err", err)
	}
}

// gotAnnounce records the incarnation a peer announced (announce).
func (t *Transport) gotAnnounce(f *wire.Frame) {
	to, err := wire.DecodeHello(f.Payload)
	reason := ""
	if err == nil && to != t.cfg.Self {
		reason, err = wire.ReasonMisdirected, fmt.Errorf("announcement for rank %d reached rank %d", to, t.cfg.Self)
	}
	var newer bool
	if err == nil {
		newer, err = t.incs.Observe(f.Sender, f.Incarnation)
	}
	if err != nil {
		if reason == "" {
			reason = wire.ReasonOf(err)
		}
		t.reject(reason, err, nil)
		return
	}
	if newer {
		t.rebound(f.Sender)
	}
}

// peerRestarted drops the connections to rank r's previous incarnation.
func (t *Transport) peerRestarted(r ranks.Rank) {
	t.log.Info("tcp: peer restarted; reconnecting", "peer", r)
	t.mu.Lock()
	if p := t.out[r]; p != nil {
		p.reset.Store(true)
	}
	t.mu.Unlock()
}

func (t *Transport) acceptLoop() {
	defer t.wg.Done()
	var delay time.Duration
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.closed.Load() {
				return
			}
			// Out of file descriptors and the like: back off, don't spin.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t.logLimited("accept", slog.LevelError, "tcp: accept failed", "err", err)
			select {
			case <-time.After(delay):
			case <-t.done:
				return
			}
			continue
		}
		delay = 0
		t.mu.Lock()
		if t.stop {
			t.mu.Unlock()
			c.Close()
			return
		}
		evicted := t.pending.Add(c)
		t.in[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		if evicted != nil {
			evicted.Close() // its reader ends
			t.reject("pending_cap", fmt.Errorf("%d connections without a Hello: closed the oldest", t.cfg.MaxPending), evicted)
		}
		go t.serve(c)
	}
}

// serve reads the frames of one incoming connection.
func (t *Transport) serve(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.pending.Done(c)
		t.mu.Lock()
		delete(t.in, c)
		t.mu.Unlock()
		c.Close()
	}()
	codec := wire.NewCodec(t.params)
	codec.SetReadLimit(helloLimit) // until the Hello
	ch := wire.NewChallenge()
	_ = c.SetWriteDeadline(time.Now().Add(t.cfg.HelloTimeout))
	if _, err := c.Write(ch[:]); err != nil {
		return
	}
	codec.Bind(ch)
	sess := wire.Session{Self: t.cfg.Self, Incarnations: t.incs}
	r := bufio.NewReaderSize(c, readBuf)
	_ = c.SetReadDeadline(time.Now().Add(t.cfg.HelloTimeout))
	for {
		f, err := codec.ReadFrame(r)
		if err == nil {
			prev := t.incs.Latest(f.Sender)
			var restarted bool
			restarted, err = sess.Accept(&f)
			if restarted {
				t.peerRestarted(f.Sender)
			}
			if err == nil && f.Type == wire.Hello && t.incs.Latest(f.Sender) != prev {
				t.rebound(f.Sender)
			}
		}
		if err != nil {
			if reason := wire.ReasonOf(err); reason != "" {
				t.reject(reason, err, c)
			} else if !t.closed.Load() && !errors.Is(err, net.ErrClosed) {
				var ne net.Error
				if _, _, ok := sess.Peer(); !ok && errors.As(err, &ne) && ne.Timeout() {
					t.reject("hello_timeout", err, c)
				}
			}
			return
		}
		switch f.Type {
		case wire.Hello:
			_ = c.SetReadDeadline(time.Time{})
			codec.SetReadLimit(0)
			t.pending.Done(c)
		case wire.Heartbeat:
			t.reject(wire.ReasonBadType, errors.New("heartbeat on a message connection"), c)
			return
		case wire.Msg:
			t.msgsRecv.Add(1)
			t.bytesRecv.Add(uint64(len(f.Payload)))
			t.cfg.Handler(f.Sender, append([]byte(nil), f.Payload...))
		case wire.Bye:
			return
		}
	}
}

// reject counts a rejected frame (or connection) and logs it at most once
// per second per reason.
func (t *Transport) reject(reason string, err error, c net.Conn) {
	t.rejMu.Lock()
	t.rejected[reason]++
	t.rejMu.Unlock()
	if c == nil {
		level := slog.LevelWarn
		if reason == wire.ReasonOldHeartbeat || reason == wire.ReasonUnbound {
			level = slog.LevelDebug // also a datagram overtaken by a later one; every emitter's first ones
		}
		t.logLimited("reject:"+reason, level, "tcp: heartbeat datagram rejected", "reason", reason, "err", err)
		return
	}
	t.logLimited("reject:"+reason, slog.LevelWarn, "tcp: frame rejected; connection closed",
		"reason", reason, "remote", c.RemoteAddr().String(), "err", err)
}

// logLimited logs at most once per second per key, reporting how many
// lines it suppressed since the last one.
func (t *Transport) logLimited(key string, level slog.Level, msg string, args ...any) {
	now := time.Now()
	t.rejMu.Lock()
	if last, ok := t.lastLog[key]; ok && now.Sub(last) < time.Second {
		t.muted[key]++
		t.rejMu.Unlock()
		return
	}
	t.lastLog[key] = now
	muted := t.muted[key]
	delete(t.muted, key)
	t.rejMu.Unlock()
	if muted > 0 {
		args = append(args, "suppressed", muted)
	}
	t.log.Log(context.Background(), level, msg, args...)
}

// Stats implements transport.Transport.
func (t *Transport) Stats() transport.Stats {
	s := transport.Stats{
		MsgsSent:          t.msgsSent.Load(),
		MsgsRecv:          t.msgsRecv.Load(),
		BytesSent:         t.bytesSent.Load(),
		BytesRecv:         t.bytesRecv.Load(),
		HeartbeatsSent:    t.hbSent.Load(),
		HeartbeatsRecv:    t.hbRecv.Load(),
		MsgsDropped:       t.msgsDropped.Load(),
		HeartbeatsDropped: t.hbDropped.Load(),
		KernelDropped:     t.hb.kernelDrops(),
	}
	t.rejMu.Lock()
	s.Rejected = make(map[string]uint64, len(t.rejected))
	for k, v := range t.rejected {
		s.Rejected[k] = v
	}
	t.rejMu.Unlock()
	return s
}

// Close implements transport.Transport: it closes the listener and every
// connection, and waits for every goroutine. Queued messages are dropped.
// It must not be called from the Handler.
func (t *Transport) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	t.cancel()
	err := t.ln.Close()
	t.hb.close()
	t.mu.Lock()
	t.stop = true
	close(t.done)
	for c := range t.in {
		c.Close()
	}
	for _, p := range t.out {
		p.closeConn()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return err
}

var (
	_ transport.Transport         = (*Transport)(nil)
	_ transport.Drainer           = (*Transport)(nil)
	_ transport.HeartbeatVerifier = (*Transport)(nil)
	_ transport.HeartbeatLanes    = (*Transport)(nil)
)
