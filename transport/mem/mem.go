// Package mem is an in-memory transport.Transport: a Network of endpoints in
// one process, for tests of the cores and in-process clusters.
//
// Each endpoint has one delivery goroutine that calls its Handler, so
// handlers of different ranks run concurrently, as with the TCP transport.
// Messages are copied on Send and delivered in order per (sender,
// destination) pair, optionally after a fixed latency and a seeded random
// delay. Heartbeats skip the queue: SendHeartbeat stores straight into the
// destination's transport.Slots word for the sender, as an RDMA write
// would.
//
// Kill(rank) simulates a crash: the rank's endpoint stops sending and
// receiving, its pending messages are lost, and messages and heartbeats
// sent to it are dropped. A new Endpoint for a killed or closed rank is a
// restart.
//
// The network costs one goroutine and one queue per endpoint, never one
// goroutine per message, so hundreds of endpoints fit in a test.
package mem

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// Defaults for the options.
const (
	DefaultQueueLen   = 1 << 16
	DefaultMaxPayload = 1 << 20
)

type options struct {
	latency    time.Duration
	maxDelay   time.Duration
	seed       uint64
	queueLen   int
	maxPayload int
}

// Option configures a Network.
type Option func(*options)

// WithDelay delays every message by a random duration in [0, maxDelay), drawn
// from a generator seeded with seed (one stream per destination). Order per
// (sender, destination) pair is kept: a message is never delivered before
// an earlier one of the same pair.
func WithDelay(maxDelay time.Duration, seed uint64) Option {
	return func(o *options) { o.maxDelay, o.seed = maxDelay, seed }
}

// WithLatency delays every message by latency, before WithDelay's random
// part: a network with a one-way latency, as a simulator models it.
func WithLatency(latency time.Duration) Option {
	return func(o *options) { o.latency = latency }
}

// WithQueueLen bounds the messages pending at each endpoint; Send drops
// (and counts) messages beyond it. The default is DefaultQueueLen.
func WithQueueLen(n int) Option { return func(o *options) { o.queueLen = n } }

// WithMaxPayload sets the largest payload Send accepts (DefaultMaxPayload
// by default).
func WithMaxPayload(n int) Option { return func(o *options) { o.maxPayload = n } }

// Network connects the endpoints of ranks 0..n-1.
type Network struct {
	n     int
	opts  options
	start time.Time
	eps   []atomic.Pointer[endpoint]

	mu     sync.Mutex
	all    []*endpoint // every endpoint ever made, for Close
	closed bool
}

// NewNetwork returns a network for n ranks without endpoints.
func NewNetwork(n int, opts ...Option) *Network {
	if n <= 0 {
		panic("mem: network needs n > 0")
	}
	o := options{queueLen: DefaultQueueLen, maxPayload: DefaultMaxPayload}
	for _, f := range opts {
		f(&o)
	}
	if o.queueLen <= 0 {
		o.queueLen = DefaultQueueLen
	}
	if o.maxPayload <= 0 {
		o.maxPayload = DefaultMaxPayload
	}
	return &Network{n: n, opts: o, start: time.Now(), eps: make([]atomic.Pointer[endpoint], n)}
}

// N returns the number of ranks.
func (nw *Network) N() int { return nw.n }

// Endpoint attaches rank to the network: heartbeats sent to rank land in
// slots (nil: dropped), messages go to h (nil: dropped). It panics if rank
// is out of range, already has a live endpoint, or the network is closed;
// an endpoint for a killed or closed rank replaces it (a restart).
func (nw *Network) Endpoint(rank ranks.Rank, slots *transport.Slots, h transport.Handler) transport.Transport {
	if int64(rank) >= int64(nw.n) {
		panic(fmt.Sprintf("mem: rank %d out of range [0,%d)", rank, nw.n))
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.closed {
		panic("mem: network closed")
	}
	if old := nw.eps[rank].Load(); old != nil && !old.killed.Load() && !old.closed.Load() {
		panic(fmt.Sprintf("mem: rank %d already has an endpoint", rank))
	}
	e := &endpoint{
		net:   nw,
		rank:  rank,
		slots: slots,
		h:     h,
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
		rng:   rand.New(rand.NewPCG(nw.opts.seed, uint64(rank))),
	}
	if nw.opts.maxDelay > 0 || nw.opts.latency > 0 {
		e.lastDue = make(map[ranks.Rank]int64)
	}
	e.wg.Add(1)
	go e.run()
	nw.all = append(nw.all, e)
	nw.eps[rank].Store(e)
	return e
}

// Kill crashes rank's current endpoint: it stops sending and receiving and
// its pending messages are dropped. Its goroutine is joined by Close. Kill
// of a rank without an endpoint does nothing.
func (nw *Network) Kill(rank ranks.Rank) {
	if int64(rank) >= int64(nw.n) {
		return
	}
	if e := nw.eps[rank].Load(); e != nil {
		e.kill()
	}
}

// Mute loses rank's heartbeats for d from now (a link cut or a stalled
// heartbeat thread): its messages still flow.
func (nw *Network) Mute(rank ranks.Rank, d time.Duration) {
	if int64(rank) >= int64(nw.n) {
		return
	}
	if e := nw.eps[rank].Load(); e != nil {
		e.mutedUntil.Store(nw.now() + int64(d))
	}
}

// Alive reports whether rank has an endpoint that is neither killed nor
// closed.
func (nw *Network) Alive(rank ranks.Rank) bool {
	if int64(rank) >= int64(nw.n) {
		return false
	}
	e := nw.eps[rank].Load()
	return e != nil && !e.killed.Load() && !e.closed.Load()
}

// Close closes every endpoint and waits for their goroutines.
func (nw *Network) Close() error {
	nw.mu.Lock()
	nw.closed = true
	all := nw.all
	nw.all = nil
	nw.mu.Unlock()
	for _, e := range all {
		e.Close()
	}
	return nil
}

func (nw *Network) now() int64 { return int64(time.Since(nw.start)) }

// item is one queued message.
type item struct {
	due  int64 // delivery time, nanoseconds since the network started
	seq  uint64
	from ranks.Rank
	p    []byte
}

func (a *item) before(b *item) bool {
	return a.due < b.due || (a.due == b.due && a.seq < b.seq)
}

// endpoint is one rank's attachment; it implements transport.Transport.
type endpoint struct {
	net   *Network
	rank  ranks.Rank
	slots *transport.Slots
	h     transport.Handler

	killed     atomic.Bool
	closed     atomic.Bool
	mutedUntil atomic.Int64 // Network.now() before which heartbeats are lost
	stopOnce   sync.Once
	wake       chan struct{}
	done       chan struct{}
	wg         sync.WaitGroup

	mu      sync.Mutex
	q       []item // min-heap by (due, seq)
	seq     uint64
	rng     *rand.Rand
	lastDue map[ranks.Rank]int64 // per sender, with delays only

	msgsSent, msgsRecv, bytesSent, bytesRecv atomic.Uint64
	hbSent, hbRecv, msgsDropped, hbDropped   atomic.Uint64
}

func (e *endpoint) stop() { e.stopOnce.Do(func() { close(e.done) }) }

func (e *endpoint) kill() {
	e.killed.Store(true)
	e.stop()
	e.mu.Lock()
	e.q = nil
	e.mu.Unlock()
}

// live reports whether e neither crashed nor closed.
func (e *endpoint) live() bool { return !e.killed.Load() && !e.closed.Load() }

// Send implements transport.Transport.
func (e *endpoint) Send(to ranks.Rank, payload []byte) error {
	if e.closed.Load() {
		return transport.ErrClosed
	}
	if int64(to) >= int64(e.net.n) {
		return transport.ErrUnknownRank
	}
	if len(payload) > e.net.opts.maxPayload {
		return transport.ErrTooLarge
	}
	if e.killed.Load() {
		return nil // a crashed process sends nothing
	}
	d := e.net.eps[to].Load()
	if d == nil || !d.live() || !d.enqueue(e.rank, payload) {
		e.msgsDropped.Add(1)
		return nil
	}
	e.msgsSent.Add(1)
	e.bytesSent.Add(uint64(len(payload)))
	return nil
}

// enqueue queues a copy of p from rank from; false if the queue is full or
// the endpoint died meanwhile.
func (e *endpoint) enqueue(from ranks.Rank, p []byte) bool {
	it := item{from: from, p: append([]byte(nil), p...)}
	e.mu.Lock()
	if !e.live() || len(e.q) >= e.net.opts.queueLen {
		e.mu.Unlock()
		return false
	}
	if e.lastDue != nil {
		due := e.net.now() + int64(e.net.opts.latency)
		if e.net.opts.maxDelay > 0 {
			due += e.rng.Int64N(int64(e.net.opts.maxDelay))
		}
		if last := e.lastDue[from]; due < last {
			due = last
		}
		e.lastDue[from] = due
		it.due = due
	}
	e.seq++
	it.seq = e.seq
	e.push(it)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return true
}

func (e *endpoint) push(it item) {
	e.q = append(e.q, it)
	i := len(e.q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !e.q[i].before(&e.q[p]) {
			break
		}
		e.q[i], e.q[p] = e.q[p], e.q[i]
		i = p
	}
}

func (e *endpoint) pop() item {
	top := e.q[0]
	last := len(e.q) - 1
	e.q[0] = e.q[last]
	e.q[last] = item{}
	e.q = e.q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && e.q[l].before(&e.q[m]) {
			m = l
		}
		if r < last && e.q[r].before(&e.q[m]) {
			m = r
		}
		if m == i {
			break
		}
		e.q[i], e.q[m] = e.q[m], e.q[i]
		i = m
	}
	if len(e.q) == 0 {
		e.q = nil // release a burst's backing array
	}
	return top
}

// run is the endpoint's delivery goroutine.
func (e *endpoint) run() {
	defer e.wg.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		var (
			it    item
			ready bool
			wait  int64 = -1
		)
		e.mu.Lock()
		if len(e.q) > 0 {
			if now := e.net.now(); e.q[0].due <= now {
				it, ready = e.pop(), true
			} else {
				wait = e.q[0].due - now
			}
		}
		e.mu.Unlock()
		if ready {
			if e.live() && e.h != nil {
				e.msgsRecv.Add(1)
				e.bytesRecv.Add(uint64(len(it.p)))
				e.h(it.from, it.p)
			}
			continue
		}
		if wait < 0 {
			select {
			case <-e.wake:
			case <-e.done:
				return
			}
			continue
		}
		timer.Reset(time.Duration(wait))
		select {
		case <-e.wake:
		case <-timer.C:
		case <-e.done:
			return
		}
	}
}

// SendHeartbeat implements transport.Transport: it stores seq into the
// destination's slot for this rank. It does not allocate.
func (e *endpoint) SendHeartbeat(to ranks.Rank, seq uint64) error {
	if e.closed.Load() {
		return transport.ErrClosed
	}
	if int64(to) >= int64(e.net.n) {
		return transport.ErrUnknownRank
	}
	if e.killed.Load() {
		return nil
	}
	d := e.net.eps[to].Load()
	if e.net.now() < e.mutedUntil.Load() || d == nil || !d.live() || d.slots == nil || !d.slots.Store(e.rank, seq) {
		e.hbDropped.Add(1)
		return nil
	}
	e.hbSent.Add(1)
	d.hbRecv.Add(1)
	return nil
}

// Stats implements transport.Transport.
func (e *endpoint) Stats() transport.Stats {
	return transport.Stats{
		MsgsSent:          e.msgsSent.Load(),
		MsgsRecv:          e.msgsRecv.Load(),
		BytesSent:         e.bytesSent.Load(),
		BytesRecv:         e.bytesRecv.Load(),
		HeartbeatsSent:    e.hbSent.Load(),
		HeartbeatsRecv:    e.hbRecv.Load(),
		MsgsDropped:       e.msgsDropped.Load(),
		HeartbeatsDropped: e.hbDropped.Load(),
		Rejected:          map[string]uint64{},
	}
}

// Close implements transport.Transport. It must not be called from the
// endpoint's own Handler.
func (e *endpoint) Close() error {
	e.closed.Store(true)
	e.stop()
	e.wg.Wait()
	e.mu.Lock()
	e.q = nil
	e.mu.Unlock()
	return nil
}
