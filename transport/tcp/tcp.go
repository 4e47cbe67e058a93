// Package tcp is Vigil's commodity transport: authenticated frames
// (package internal/wire) over TCP, for clusters without RDMA.
//
// Outgoing traffic uses two connections per destination, both opened
// lazily and both starting with an authenticated Hello naming this rank and
// its incarnation:
//   - a message connection, fed by a bounded per-peer queue and drained by
//     one writer goroutine: Send copies the payload, never blocks, and drops
//     (counting) when the queue is full. When a dial fails, the queued
//     messages are dropped and the next dial waits for an exponential
//     backoff, which only a new message starts: a dead peer costs nothing
//     while nobody talks to it;
//   - a heartbeat connection, written synchronously by the emitter thread
//     from a pre-encoded frame with a short write deadline. SendHeartbeat
//     does not allocate once connected; when the connection is missing it
//     starts a background dial and drops that heartbeat, so the emitter
//     never waits for a dial. A heartbeat whose deadline passes before any
//     byte is written is dropped and the connection kept (one preemption
//     of the emitter thread must not cost a redial); a partial write
//     closes it.
//
// Peers never write on the connections we open, so each one also has a
// goroutine blocked in Read: when the peer closes or resets it, the next
// send redials instead of losing its data in a dead socket. A Hello from a
// newer incarnation of a rank (a restart) also drops our connections to it.
//
// Incoming connections get one reader goroutine each. Every frame is
// authenticated (HMAC-SHA256 under the job key) and checked (job ID, known
// rank, Hello first, incarnation not stale) before it is used: heartbeats
// store into Config.Slots, messages go to Config.Handler. A rejected frame
// is counted by reason in Stats().Rejected (the wire.Reason constants, plus
// "hello_timeout" for a connection silent for Config.HelloTimeout), logged
// at most once per second per reason, and closes its connection. A Bye
// frame closes the connection quietly (this transport does not send one
// yet: an orderly close is an EOF between frames). Reader goroutines count
// the bytes they read and act on, so that HeartbeatBacklog can tell an
// observer whether heartbeats wait in its receive path (backlog.go).
//
// Close closes the listener and every connection and waits for every
// goroutine of the transport.
package tcp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

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

	mu   sync.Mutex // guards out, in, hbIn
	out  map[ranks.Rank]*peer
	in   map[net.Conn]struct{}
	hbIn map[ranks.Rank][]*inConn // incoming heartbeat connections (backlog.go)
	stop bool                     // set under mu by Close: no new goroutines

	hbMu    sync.Mutex // the heartbeat path: hbs, hbFrame, hbStop
	hbs     map[ranks.Rank]*hbPeer
	hbFrame *wire.HeartbeatFrame
	hbStop  bool

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
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen: %w", err)
	}
	t := &Transport{
		cfg: cfg,
		params: wire.Params{
			JobID: cfg.JobID, Key: cfg.Key, Rank: cfg.Self, Incarnation: cfg.Incarnation,
			N: cfg.N, MaxPayload: cfg.MaxPayload,
		},
		ln:       ln,
		incs:     wire.NewIncarnations(cfg.N),
		dialer:   net.Dialer{Timeout: cfg.DialTimeout},
		done:     make(chan struct{}),
		out:      make(map[ranks.Rank]*peer),
		in:       make(map[net.Conn]struct{}),
		hbIn:     make(map[ranks.Rank][]*inConn),
		hbs:      make(map[ranks.Rank]*hbPeer),
		rejected: make(map[string]uint64),
		lastLog:  make(map[string]time.Time),
		muted:    make(map[string]uint64),
	}
	t.log = cfg.Logger.With("rank", cfg.Self)
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.hbFrame = wire.NewCodec(t.params).NewHeartbeatFrame()
	t.wg.Add(1)
	go t.acceptLoop()
	return t, nil
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
// starts a goroutine that waits for the connection to end: peers never
// write on the connections we open, so any return from Read means the peer
// closed or reset it, and gone(c) makes the next send redial instead of
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

// hbPeer is the heartbeat path to one rank. Its fields are guarded by the
// transport's hbMu.
type hbPeer struct {
	rank    ranks.Rank
	conn    net.Conn
	dialing bool
	backoff time.Duration
	retryAt time.Time
}

// SendHeartbeat implements transport.Transport. It writes a pre-encoded
// frame on the heartbeat connection to rank to with a HeartbeatTimeout
// deadline and does not allocate. Without a connection it starts a
// background dial (unless one is running or backing off) and drops the
// heartbeat. A write that times out before writing anything drops the
// heartbeat and keeps the connection; any other failed write closes it.
// Drops are counted in Stats().HeartbeatsDropped, not returned.
func (t *Transport) SendHeartbeat(to ranks.Rank, seq uint64) error {
	if int64(to) >= int64(t.cfg.N) {
		return transport.ErrUnknownRank
	}
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	if t.hbStop {
		return transport.ErrClosed
	}
	h := t.hbs[to]
	if h == nil {
		h = &hbPeer{rank: to}
		t.hbs[to] = h
	}
	if h.conn == nil {
		if !h.dialing && !time.Now().Before(h.retryAt) {
			h.dialing = true
			t.wg.Add(1)
			go t.dialHeartbeat(h)
		}
		t.hbDropped.Add(1)
		return nil
	}
	_ = h.conn.SetWriteDeadline(time.Now().Add(t.cfg.HeartbeatTimeout))
	if n, err := h.conn.Write(t.hbFrame.Encode(seq)); err != nil {
		t.hbDropped.Add(1)
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
			// Nothing written (the peer's buffer is full, or this thread
			// was descheduled past the deadline before the write): the
			// stream is intact and the next heartbeat may go through it.
			return nil
		}
		// A partial write leaves the stream mid-frame: never reuse it.
		h.conn.Close()
		h.conn = nil
		return nil
	}
	t.hbSent.Add(1)
	return nil
}

// dialHeartbeat opens h's connection in the background.
func (t *Transport) dialHeartbeat(h *hbPeer) {
	defer t.wg.Done()
	c, err := t.dial(h.rank, wire.NewCodec(t.params), func(c net.Conn) {
		t.hbMu.Lock()
		if h.conn == c {
			h.conn = nil
		}
		t.hbMu.Unlock()
	})
	t.hbMu.Lock()
	defer t.hbMu.Unlock()
	h.dialing = false
	if err != nil || t.hbStop {
		if c != nil {
			c.Close()
		}
		if err != nil && !t.hbStop {
			h.backoff = min(max(2*h.backoff, minBackoff), maxBackoff)
			h.retryAt = time.Now().Add(h.backoff)
			t.logLimited("dial", slog.LevelInfo, "tcp: cannot reach heartbeat peer",
				"peer", h.rank, "retry_in", h.backoff, "err", err)
		}
		return
	}
	h.backoff = 0
	h.conn = c
}

// peerRestarted drops the connections to rank r's previous incarnation.
func (t *Transport) peerRestarted(r ranks.Rank) {
	t.log.Info("tcp: peer restarted; reconnecting", "peer", r)
	t.mu.Lock()
	if p := t.out[r]; p != nil {
		p.reset.Store(true)
	}
	t.mu.Unlock()
	t.hbMu.Lock()
	if h := t.hbs[r]; h != nil && h.conn != nil {
		h.conn.Close()
		h.conn = nil
	}
	t.hbMu.Unlock()
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
		t.in[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.serve(c)
	}
}

// serve reads the frames of one incoming connection.
func (t *Transport) serve(c net.Conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.in, c)
		t.mu.Unlock()
		c.Close()
	}()
	codec := wire.NewCodec(t.params)
	sess := wire.Session{Self: t.cfg.Self, Incarnations: t.incs}
	ic := newInConn(c) // counts bytes read and acted on (backlog.go)
	r := bufio.NewReaderSize(ic, readBuf)
	isHB := false
	_ = c.SetReadDeadline(time.Now().Add(t.cfg.HelloTimeout))
	for {
		f, err := codec.ReadFrame(r)
		if err == nil {
			var restarted bool
			restarted, err = sess.Accept(&f)
			if restarted {
				t.peerRestarted(f.Sender)
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
		case wire.Heartbeat:
			seq, _ := wire.DecodeHeartbeat(f.Payload) // length checked by Accept
			t.cfg.Slots.Store(f.Sender, seq)
			t.hbRecv.Add(1)
			ic.done.Store(ic.read.Load() - int64(r.Buffered()))
			if !isHB {
				isHB = true
				defer t.addHBConn(f.Sender, ic)()
			}
			if t.cfg.afterHeartbeat != nil {
				t.cfg.afterHeartbeat(seq)
			}
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
	t.hbMu.Lock()
	t.hbStop = true
	for _, h := range t.hbs {
		if h.conn != nil {
			h.conn.Close()
			h.conn = nil
		}
	}
	t.hbMu.Unlock()
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

var _ transport.Transport = (*Transport)(nil)
