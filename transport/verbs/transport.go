package verbs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	ibv "github.com/vigil-hpc/vigil/verbs"
)

// Config configures a Transport.
type Config struct {
	// Self is this process's rank, below N.
	Self ranks.Rank
	// N is the number of ranks of the job.
	N int
	// JobID and Key authenticate every datagram as the TCP transport's
	// frames (internal/wire); Key has at least 16 bytes.
	JobID uint64
	Key   []byte
	// Device is the RDMA device to open ("": the device behind Netdev,
	// else the first one).
	Device string
	// Netdev restricts the source GID to one network device's addresses;
	// without Device it also picks the RDMA device carrying it (rdmamap).
	Netdev string
	// RC are the settings of the heartbeat RC connections (zero value:
	// Timeout 14 ≈ 67 ms, RetryCnt 6: a dead observer shows as a failed
	// write after ≈ 0.5 s; shorter ones break links to live but slow
	// peers, which costs a reconnection, never a suspicion). Heartbeats do
	// not wait for that: from the fourth heartbeat without a write
	// completion they also go as datagrams (hbLink.stalled).
	RC ibv.RCParams
	// PollFor is how long the progress engine keeps polling its CQ
	// after the last message sent or received before it sleeps on the
	// completion channel (0: DefaultPollFor; negative: never polls on).
	// Heartbeat datagrams do not extend it: an idle detector sleeps.
	PollFor time.Duration
	// NoWindows keeps the slot array REMOTE_WRITE through its own rkey
	// even on a device with type 2 memory windows (by default each
	// emitter can write only its own word, through its own link).
	NoWindows bool
	// Incarnation identifies this start of the process (0: drawn).
	Incarnation uint64
	// Logger receives connection events and rejections (nil: discarded).
	Logger *slog.Logger
	// udOnly keeps every message on the reliable UD channel (no RC
	// message links, rcmsg.go).
	udOnly bool
}

// Resource sizes.
const (
	recvDepth    = 256 // posted UD receive buffers
	sendBufs     = 128 // UD send buffers (≤ the send queue)
	udSendWR     = 256
	maxPassive   = 4       // RC QPs kept for emitters writing into our slots
	hbWRID       = 1 << 62 // inline datagrams (no send buffer to return)
	writerSendWR = 128
	// udInline is the inline data limit asked for the UD QP: a Msg frame
	// with a payload of up to
	// udInline-wire.HeaderSize-wire.TagSize-toSize-dataHeader bytes (and
	// every ACK and heartbeat) is posted inline, without a send buffer.
	udInline = 256
	// signalEvery: one inline datagram in signalEvery is signalled, so
	// that the send queue's entries are retired without a completion per
	// datagram.
	signalEvery = 32
)

// DefaultPollFor is Config.PollFor's default: a message exchange (a
// broadcast, an agreement) keeps the progress engine polling, as perftest
// does, for at most 1 ms of one core after its last message; an idle
// transport sleeps on the CQ channel and costs nothing.
const DefaultPollFor = time.Millisecond

// Transport is the verbs implementation of transport.Transport.
type Transport struct {
	cfg   Config
	log   *slog.Logger
	ctx   *ibv.Context
	pd    *ibv.PD
	slots *ibv.MR // the slot array: REMOTE_WRITE, N words
	hbs   *transport.Slots
	sendQ *ibv.CQ // UD send completions
	recvQ *ibv.CQ // UD receive completions, with a channel
	ud    *ibv.QP
	ring  *ibv.RecvRing
	pcq   *ibv.CQ // passive RC QPs (only window binds are posted on them)
	// windows: each emitter writes its slot word through a type 2 memory
	// window bound over that word alone (the device has them).
	windows bool
	mtu     int

	// mu guards locked, the state the progress engine runs: whoever holds
	// mu owns it (state.go). The engine holds it while it works; a Send
	// that finds it free posts itself, one that does not leaves its work
	// on todo for the next holder.
	mu     sync.Mutex
	locked state // reached through acquire and tryAcquire
	todo   todo  // work for the next holder of mu (todo.go)
	eng    engine
	sendMR *ibv.MR // the UD send buffers (which are free: state.free)
	inline int     // the UD QP's inline limit
	// handler gets the messages (set by Start; called by the engine
	// with mu released).
	handler transport.Handler
	lk      linker

	links      []atomic.Pointer[hbLink]
	connecting []atomic.Bool
	// connectSince is when the emitter last asked for a link to each rank
	// (ns; requestLink).
	connectSince []atomic.Int64
	graveMu      sync.Mutex
	grave        []*hbLink    // replaced links, freed by the emitter thread (bury)
	graveN       atomic.Int32 // len(grave), set under graveMu, read without it on the emitter's fast path

	quit    chan struct{}
	wg      sync.WaitGroup
	started bool
	closed  atomic.Bool
	// failed is set once the transport cannot carry messages any more (a
	// UD QP, CQ or device error): heartbeats and messages stop (failStop).
	failed atomic.Pointer[failure]

	msgsSent, msgsRecv, bytesSent, bytesRecv atomic.Uint64
	hbRecv, msgsDropped, hbDropped           atomic.Uint64
	rcErrors, udHeartbeats                   atomic.Uint64
	// lateUD counts heartbeats also sent as datagrams because the RC
	// link's writes had stopped completing (hbLink.stalled).
	lateUD atomic.Uint64
	// rcWrites counts heartbeats written over RC links, as published: a
	// live link adds its writes in batches of publishEvery (the emitter's
	// fast path has no atomic counter), so it lags by fewer than
	// publishEvery per live link.
	rcWrites                         atomic.Uint64
	linksUp, asyncEvents, portErrors atomic.Uint64
	restarts                         atomic.Uint64
	rcMsgErrors, rcResent            atomic.Uint64
	rcEvicted, rcLinksUp             atomic.Uint64
	rcMsgBufs                        atomic.Bool // the message links' buffers are registered
	rcQPs, ahs                       atomic.Int64
	rejMu                            sync.Mutex
	rejected                         map[string]uint64
	lastLog                          map[string]time.Time
}

// delivery is a whole message for the handler.
type delivery struct {
	from ranks.Rank
	msg  []byte
}

// passiveQP is the observer's end of an emitter's heartbeat connection.
type passiveQP struct {
	emitter ranks.Rank
	remote  uint32 // the emitter's QP number
	qp      *ibv.QP
	mr      *ibv.MR // the emitter's slot word as a region of its own (nil: no window)
	mw      *ibv.MW // the window over it (nil: none)
	rkey    uint32  // its rkey, sent in CONNACK
}

// Open opens the RDMA device and creates everything the transport needs
// before the address exchange: the slot array (registered REMOTE_WRITE,
// exactly N words, nothing else of this process exposed), the UD QP with
// its receive ring and send buffers, and the CQs of the RC heartbeat
// links. It fails with an error wrapping ibv.ErrNoDevice on a machine
// without RDMA, and with one naming Config.Netdev when no RDMA device
// carries that interface.
func Open(cfg Config) (*Transport, error) {
	switch {
	case cfg.N < 1:
		return nil, fmt.Errorf("verbs transport: Config.N = %d, want ≥ 1", cfg.N)
	case int64(cfg.Self) >= int64(cfg.N):
		return nil, fmt.Errorf("verbs transport: Config.Self = %d, want < N = %d", cfg.Self, cfg.N)
	case cfg.JobID == 0:
		return nil, fmt.Errorf("verbs transport: Config.JobID is zero")
	case len(cfg.Key) < wire.MinKeyLen:
		return nil, fmt.Errorf("verbs transport: Config.Key has %d bytes, want ≥ %d", len(cfg.Key), wire.MinKeyLen)
	}
	if cfg.RC == (ibv.RCParams{}) {
		cfg.RC = ibv.DefaultRCParams()
		cfg.RC.Timeout, cfg.RC.RetryCnt = 14, 6
	}
	if cfg.Incarnation == 0 {
		cfg.Incarnation = wire.NewIncarnation()
	}
	if cfg.PollFor == 0 {
		cfg.PollFor = DefaultPollFor
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	t := &Transport{cfg: cfg, log: cfg.Logger.With("transport", "verbs"),
		links:    make([]atomic.Pointer[hbLink], cfg.N),
		lk:       linker{jobs: make(chan func(), linkerQueue)},
		quit:     make(chan struct{}),
		rejected: map[string]uint64{},
		lastLog:  map[string]time.Time{},
	}
	t.locked = state{Transport: t,
		hot:       make([]hotCount, cfg.N),
		dests:     make([]*ibv.UDDest, cfg.N),
		wcs:       make([]ibv.WC, 16),
		pending:   map[ranks.Rank]*pendingLink{},
		accepting: map[ranks.Rank]uint32{},
	}
	t.connecting = make([]atomic.Bool, cfg.N)
	t.connectSince = make([]atomic.Int64, cfg.N)
	dev := cfg.Device
	if dev == "" && cfg.Netdev != "" { // the device behind that interface
		d, err := ibv.DeviceForNetdev(cfg.Netdev)
		if err != nil {
			return nil, fmt.Errorf("verbs transport: Config.Netdev %q: %w", cfg.Netdev, err)
		}
		dev = d
	}
	var err error
	if t.ctx, err = ibv.Open(dev); err != nil {
		return nil, err
	}
	if err := t.setup(); err != nil {
		t.ctx.Close()
		return nil, err
	}
	t.logMode()
	return t, nil
}

// logMode says which device and slot protection the transport runs with:
// without type 2 memory windows every rank of the job can write any word of
// this rank's slot array, so a faulty rank could stall an observer's
// progress check and get a live rank suspected.
func (t *Transport) logMode() {
	args := []any{"device", t.ctx.Name(), "rank", t.cfg.Self, "path_mtu", t.mtu, "memory_windows", t.windows}
	if t.windows {
		t.log.Info("verbs transport open: each emitter writes only its own slot word (type 2 memory window)", args...)
		return
	}
	why := "the device has no type 2 memory windows"
	if t.cfg.NoWindows {
		why = "Config.NoWindows"
	}
	t.log.Warn("verbs transport open without memory windows: every rank of the job can write any word of this rank's slot array", append(args, "why", why)...)
}

func (t *Transport) setup() error {
	var err error
	if t.pd, err = t.ctx.AllocPD(); err != nil {
		return err
	}
	// With type 2 memory windows the slot array is not remotely writable
	// through its own rkey at all: each emitter gets a window over its own
	// word, usable only through its link (accept). Without, the array is
	// REMOTE_WRITE and its rkey (bootstrap) reaches every word.
	access := ibv.AccessRemoteWrite
	if t.windows = t.ctx.Attr().MemWindowType2 && !t.cfg.NoWindows; t.windows {
		access = ibv.AccessLocalWrite
	}
	if t.slots, err = t.pd.AllocMR(8*t.cfg.N, access); err != nil {
		return err
	}
	t.hbs = transport.SlotsOver(t.slots.Words())
	if t.sendQ, err = t.ctx.CreateCQ(2*udSendWR, false); err != nil {
		return err
	}
	if t.recvQ, err = t.ctx.CreateCQ(2*recvDepth, true); err != nil {
		return err
	}
	udc := ibv.QPConfig{Type: ibv.UD, SendCQ: t.sendQ, RecvCQ: t.recvQ,
		MaxSendWR: udSendWR, MaxRecvWR: recvDepth, MaxInline: udInline, Netdev: t.cfg.Netdev}
	if t.ud, err = t.pd.CreateQP(udc); err != nil {
		udc.MaxInline = 64 // a device with a smaller inline limit
		if t.ud, err = t.pd.CreateQP(udc); err != nil {
			return err
		}
	}
	t.inline = t.ud.MaxInline()
	t.mtu = t.ud.PathMTU().Bytes()
	if t.mtu < 256 {
		return fmt.Errorf("verbs transport: path MTU %d too small", t.mtu)
	}
	if t.ring, err = t.ud.NewRecvRing(recvDepth, t.mtu); err != nil {
		return err
	}
	if t.sendMR, err = t.pd.AllocMR(sendBufs*t.mtu, ibv.AccessLocalWrite); err != nil {
		return err
	}
	st := &t.locked // no other goroutine yet
	for i := sendBufs - 1; i >= 0; i-- {
		st.free = append(st.free, i)
	}
	if t.pcq, err = t.ctx.CreateCQ(16, false); err != nil {
		return err
	}
	st.tx = wire.NewCodec(t.datagramParams())
	frag := t.mtu - wire.HeaderSize - wire.TagSize - toSize - dataHeader
	st.rel = newReliable(defaultRelConfig(frag))
	st.rel.xmit, st.rel.deliver, st.rel.gaveUp = st.xmit, st.deliver, st.gaveUp
	st.rel.duplicate = func(from ranks.Rank, seq uint64) {
		t.reject("duplicate", fmt.Errorf("rank %d DATA packet %d already received", from, seq))
	}
	return t.initEngine()
}

// datagramParams are the wire parameters of this transport's datagrams:
// the job's, tagged with SipHash-2-4-128 (wire.MACSipHash), which costs
// half of HMAC-SHA256 per datagram on the host and a sixth in the guest
// (BenchmarkDatagramMAC).
func (t *Transport) datagramParams() wire.Params {
	return wire.Params{JobID: t.cfg.JobID, Key: t.cfg.Key, Rank: t.cfg.Self, Incarnation: t.cfg.Incarnation,
		N: t.cfg.N, MaxPayload: t.mtu, MAC: wire.MACSipHash}
}

// Slots returns the slot array in registered memory: the node's observer
// check loads its emitter's word there (node.Config.Slots).
func (t *Transport) Slots() *transport.Slots { return t.hbs }

// Device returns the name of the RDMA device in use.
func (t *Transport) Device() string { return t.ctx.Name() }

// Addr returns this rank's address for the bootstrap exchange.
func (t *Transport) Addr() string {
	ep := t.ud.Endpoint()
	return Address{GID: ep.GID, LID: ep.LID, QPN: ep.QPN, QKey: ep.QKey, Slots: t.slots.Remote(), Inc: t.cfg.Incarnation}.String()
}

// Incarnation returns the incarnation this transport announces.
func (t *Transport) Incarnation() uint64 { return t.cfg.Incarnation }

// Start takes every rank's address (indexed by rank, as the bootstrap
// exchange returns them) and the message handler, and starts the
// progress engine. Errors name the bad rank.
func (t *Transport) Start(addrs []string, h transport.Handler) error {
	if t.closed.Load() {
		return transport.ErrClosed
	}
	if t.started {
		return errors.New("verbs transport: Start called twice")
	}
	if h == nil {
		return errors.New("verbs transport: nil Handler")
	}
	peers, _, err := t.parsePeers(addrs, false)
	if err != nil {
		return fmt.Errorf("verbs transport: %w", err)
	}
	t.locked.peers, t.handler, t.started = peers, h, true // before the goroutines
	t.wg.Add(2)
	go t.run()
	go t.runLinker()
	return nil
}

// parsePeers checks an address table indexed by rank (with blank, ""
// leaves a rank out: its entry is false in set).
func (t *Transport) parsePeers(addrs []string, blank bool) ([]Address, []bool, error) {
	if len(addrs) != t.cfg.N {
		return nil, nil, fmt.Errorf("%d addresses for %d ranks", len(addrs), t.cfg.N)
	}
	peers, set := make([]Address, len(addrs)), make([]bool, len(addrs))
	for r, s := range addrs {
		if s == "" && blank {
			continue
		}
		a, err := ParseAddress(s)
		if err != nil {
			return nil, nil, fmt.Errorf("rank %d: %w", r, err)
		}
		if a.Slots.Len < uint64(8*t.cfg.N) {
			return nil, nil, fmt.Errorf("rank %d: slot array of %d bytes, want %d for %d ranks", r, a.Slots.Len, 8*t.cfg.N, t.cfg.N)
		}
		peers[r], set[r] = a, true
	}
	if mine := t.Addr(); set[t.cfg.Self] && addrs[t.cfg.Self] != mine {
		return nil, nil, fmt.Errorf("the exchange returned %q for this rank %d, which published %q", addrs[t.cfg.Self], t.cfg.Self, mine)
	}
	return peers, set, nil
}

// SetPeers gives the transport new addresses, indexed by rank as Start's
// ("" leaves a rank's address as it is; this rank's own entry is "" or
// Addr()), for instance the address of a rank that restarted: a new
// incarnation with a new UD QP and slot array. For a rank whose address
// names a newer incarnation than the one known, the transport forgets its
// previous incarnation (see peerRestarted): address handle, reliability
// state both ways, heartbeat links both ways, and this rank's slot word for
// it, reset to 0 so that the new incarnation's heartbeats count from 1.
// Its datagrams are accepted only from the new address's QP, and those of
// older incarnations are rejected as stale. An address of an older
// incarnation than the one known is ignored (and logged).
//
// SetPeers does not wait: the change is queued for the progress engine,
// ahead of every later Send and heartbeat. It fails on a malformed table
// or a full engine queue.
func (t *Transport) SetPeers(addrs []string) error {
	if t.closed.Load() {
		return transport.ErrClosed
	}
	if !t.started {
		return errors.New("verbs transport: SetPeers before Start")
	}
	peers, set, err := t.parsePeers(addrs, true)
	if err != nil {
		return fmt.Errorf("verbs transport: SetPeers: %w", err)
	}
	set[t.cfg.Self] = false
	if !t.submit(cmd{op: opDo, fn: func(st *state) { st.setPeers(peers, set) }}) {
		return errEngineFull
	}
	return nil
}

// setPeers applies SetPeers' table.
func (st *state) setPeers(peers []Address, set []bool) {
	for i, a := range peers {
		r, cur := ranks.Rank(i), st.peers[i]
		switch {
		case !set[i] || a == cur:
			continue
		case a.Inc < cur.Inc:
			st.logLimited("oldaddr", slog.LevelWarn, "SetPeers: address of an older incarnation ignored",
				"peer", r, "incarnation", a.Inc, "known", cur.Inc)
			continue
		}
		if d := st.dests[r]; d != nil && (a.endpoint() != cur.endpoint()) {
			// A send posted to the old address may still use its handle:
			// it is freed with the transport.
			st.oldAHs = append(st.oldAHs, d.AH)
			st.dests[r] = nil
		}
		st.peers[r] = a
		if a.Inc > cur.Inc {
			st.peerRestarted(r, cur.Inc)
		}
		st.log.Info("peer address changed", "peer", r, "qpn", a.QPN, "incarnation", a.Inc)
	}
}

// peerRestarted forgets rank r's previous incarnation old (r's new
// incarnation is in t.peers[r].Inc): the messages still queued or
// unacknowledged towards it are dropped (counted in MsgsDropped) and the
// reliability state both ways restarts from sequence number 1; the heartbeat
// link to it (this rank its emitter) is retired and one in progress
// abandoned, the passive end of its link to this rank closed; and this
// rank's slot word for it is set to 0, so that the new incarnation's
// heartbeats, which count from 1 again, move it.
func (st *state) peerRestarted(r ranks.Rank, old uint64) {
	if n := st.rel.reset(r); n > 0 {
		st.msgsDropped.Add(uint64(n))
	}
	st.msgPeerRestarted(r)
	if p := st.pending[r]; p != nil {
		delete(st.pending, r)
		st.freePending(p)
	}
	delete(st.accepting, r)
	st.connecting[r].Store(false)
	if l := st.links[r].Swap(nil); l != nil {
		st.retire(l)
	}
	keep := st.passive[:0]
	var gone []*passiveQP
	for _, p := range st.passive {
		if p.emitter == r {
			gone = append(gone, p)
		} else {
			keep = append(keep, p)
		}
	}
	clear(st.passive[len(keep):])
	st.passive = keep
	st.freePassive(gone...)
	atomic.StoreUint64(st.hbs.Word(r), 0)
	st.restarts.Add(1)
	st.log.Info("peer restarted: its sequence numbers, heartbeat links and slot word reset", "peer", r,
		"incarnation", st.peers[r].Inc, "previous", old)
}

// Send implements transport.Transport: the message goes out over the
// reliable UD channel (fragmented above one datagram), at once as far as
// the peer's window allows, queued otherwise. Send never waits: if the
// progress engine's state is free (the engine yields or sleeps) it
// posts the datagrams itself, else it hands the message to the engine,
// which is then awake and takes it next. A message the engine cannot take
// (its queue or the peer's is full) is counted in MsgsDropped.
func (t *Transport) Send(to ranks.Rank, payload []byte) error {
	if t.closed.Load() {
		return transport.ErrClosed
	}
	if int64(to) >= int64(t.cfg.N) {
		return transport.ErrUnknownRank
	}
	if len(payload) > maxPayload {
		return transport.ErrTooLarge
	}
	if !t.started {
		return errors.New("verbs transport: Send before Start")
	}
	if f := t.failed.Load(); f != nil {
		t.msgsDropped.Add(1)
		return f.err
	}
	if st, ok := t.tryAcquire(); ok {
		// The engine is yielding or asleep: post at once, as it
		// would (a hand-off would wait for its thread to be scheduled),
		// after what is queued (a message queued by an earlier Send goes
		// first: order per destination).
		if t.closed.Load() { // Close holds t.mu while it frees the objects
			st.release()
			return transport.ErrClosed
		}
		st.drainCmds()
		n := now()
		err := st.sendMsg(to, payload, false, n)
		st.pollFor(n) // the engine polls for the reply
		st.kick = true
		st.release()
		if err != nil {
			t.msgsDropped.Add(1)
			return err
		}
	} else if !t.submit(cmd{op: opSend, to: to, msg: append([]byte(nil), payload...)}) {
		t.msgsDropped.Add(1)
		return errEngineFull
	} else if t.closed.Load() {
		return transport.ErrClosed // the engine may have stopped before taking it
	}
	t.msgsSent.Add(1)
	t.bytesSent.Add(uint64(len(payload)))
	return nil
}

// errEngineFull is returned when the to-do list of t.mu is full (todoMax).
var errEngineFull = errors.New("verbs transport: progress engine queue full")

// frame returns the authenticated Msg frame carrying packet pkt to rank
// to, bound to to's incarnation (valid until the next call).
func (st *state) frame(to ranks.Rank, pkt []byte) ([]byte, error) {
	st.pktBuf = append(appendDatagramHeader(st.pktBuf[:0], st.peers[to].Inc), pkt...)
	var err error
	if st.txBuf, err = st.tx.Append(st.txBuf[:0], wire.Msg, st.pktBuf); err != nil {
		return nil, err
	}
	if st.capture != nil {
		st.capture(to, st.txBuf)
	}
	return st.txBuf, nil
}

// xmit sends one reliability-layer packet as an authenticated Msg frame:
// inline if it fits, else from a registered send buffer. A
// datagram that cannot be posted is lost like one lost on the wire: the
// reliability layer resends it.
func (st *state) xmit(to ranks.Rank, pkt []byte) {
	if _, err := st.frame(to, pkt); err != nil {
		st.logLimited("xmit", slog.LevelError, "cannot frame datagram", "err", err)
		return
	}
	d, err := st.dest(to)
	if err != nil {
		st.logLimited("ah", slog.LevelWarn, "no address handle", "to", to, "err", err)
		return
	}
	if len(st.txBuf) <= st.inline {
		if err := st.postInline(d, st.txBuf); err != nil {
			st.logLimited("post", slog.LevelWarn, "UD send failed", "to", to, "err", err)
		}
		return
	}
	if len(st.free) == 0 {
		st.reap()
		if len(st.free) == 0 {
			st.starved++
			return
		}
	}
	slot := st.free[len(st.free)-1]
	off := slot * st.mtu
	copy(st.sendMR.Bytes()[off:], st.txBuf)
	if err := st.ud.PostSendUDFrom(uint64(slot), *d, st.sendMR, off, len(st.txBuf), true); err != nil {
		st.logLimited("post", slog.LevelWarn, "UD send failed", "to", to, "err", err)
		return
	}
	st.free = st.free[:len(st.free)-1]
	st.unreaped++
}

// postInline posts frame inline to d: no send buffer, and only
// one datagram in signalEvery is signalled (its completion retires the
// unsignalled ones before it). A full send queue is reaped and the post
// tried once more.
func (st *state) postInline(d *ibv.UDDest, frame []byte) error {
	sig := st.unsig+1 >= signalEvery
	err := st.ud.PostSendUD(hbWRID, *d, frame, sig)
	if err != nil {
		st.reap()
		err = st.ud.PostSendUD(hbWRID, *d, frame, sig)
	}
	if err != nil {
		return err
	}
	if sig {
		st.unsig = 0
		st.unreaped++
	} else {
		st.unsig++
	}
	return nil
}

// dest returns (creating on first use) the UD destination of rank r.
func (st *state) dest(r ranks.Rank) (*ibv.UDDest, error) {
	if d := st.dests[r]; d != nil {
		return d, nil
	}
	ah, err := st.ud.CreateAHFor(st.peers[r].endpoint())
	if err != nil {
		return nil, err
	}
	d := &ibv.UDDest{AH: ah, QPN: st.peers[r].QPN, QKey: st.peers[r].QKey}
	st.dests[r] = d
	st.ahs.Add(1)
	return d, nil
}

// reap polls the UD send CQ and returns finished buffers to the pool.
func (st *state) reap() {
	for {
		n, err := st.sendQ.Poll(st.wcs)
		if err != nil {
			st.logLimited("reap", slog.LevelError, "polling the UD send CQ", "err", err)
			return
		}
		st.unreaped = max(0, st.unreaped-n)
		for i := range st.wcs[:n] {
			wc := &st.wcs[i]
			if wc.WRID < sendBufs {
				st.free = append(st.free, int(wc.WRID))
			}
			if err := wc.Err(); err != nil {
				st.reject("ud_send_error", err)
				if wc.Status == ibv.WCWRFlushErr {
					st.checkUD("a UD send was flushed")
				}
			}
		}
		if n < len(st.wcs) {
			return
		}
	}
}

// onPacket handles one received DATA or ACK packet (frag is only
// valid during the call: the layer copies what it keeps); the messages
// it completes go to ready, for the engine's handOut.
func (st *state) onPacket(from ranks.Rank, h pktHeader, frag []byte) {
	if st.ml != nil {
		// A message confirmed over RC is in the message CQ before any
		// datagram sent after it: it goes to ready first (see msgLinks).
		st.pollRC()
	}
	n := now()
	st.traffic = true
	if h.kind == kindAck {
		st.rel.onAck(from, h.seq, n)
	} else {
		st.rel.onData(from, h, frag, n)
	}
}

// deliver receives whole messages, in order, from the reliability layer.
// The message is the layer's own copy: it goes to the handler
// as is, once the packet has been handled.
func (st *state) deliver(from ranks.Rank, ctl bool, m []byte) {
	if ctl {
		st.onControl(from, m)
		return
	}
	st.ready = append(st.ready, delivery{from, m})
}

// gaveUp is called when a peer stopped acknowledging.
func (st *state) gaveUp(to ranks.Rank, msgs int) {
	st.msgsDropped.Add(uint64(msgs))
	st.logLimited("gaveup", slog.LevelInfo, "peer does not acknowledge: messages dropped", "to", to, "messages", msgs)
	if p := st.pending[to]; p != nil {
		delete(st.pending, to)
		st.freePending(p)
	}
	st.connecting[to].Store(false)
	st.msgPeerGone(to)
}

// onDatagram authenticates one received datagram: a Msg frame from the
// sender's current incarnation (an older one's is stale; a newer one, from
// the QP its address names, means it restarted: peerRestarted), posted by
// the UD QP its address names, bound to this transport's incarnation.
// Heartbeats are stored into the slot array here (the same word an RDMA
// write lands in); DATA and ACK packets go to the reliability layer.
func (st *state) onDatagram(rx *wire.Codec, wc *ibv.WC, msg []byte) {
	if msg == nil {
		st.reject("recv_error", wc.Err())
		if wc.Status == ibv.WCWRFlushErr {
			st.checkUD("a UD receive was flushed")
		}
		return
	}
	f, n, err := rx.Decode(msg)
	if err != nil {
		st.reject(reasonOr(err, "bad_frame"), err)
		return
	}
	if n != len(msg) {
		st.reject("trailing_bytes", fmt.Errorf("%d bytes after a %d-byte frame", len(msg)-n, n))
		return
	}
	p := &st.peers[f.Sender]
	if f.Incarnation < p.Inc {
		st.reject(wire.ReasonStale, fmt.Errorf("rank %d incarnation %#x older than %#x", f.Sender, f.Incarnation, p.Inc))
		return
	}
	if wc.SrcQP != p.QPN {
		st.reject("wrong_source_qp", fmt.Errorf("rank %d frame from QP %d, rank %d published QP %d", f.Sender, wc.SrcQP, f.Sender, p.QPN))
		return
	}
	if f.Type != wire.Msg {
		st.reject("unexpected_type", fmt.Errorf("%s frame over UD", f.Type))
		return
	}
	to, h, frag, err := decodeDatagram(f.Payload)
	if err != nil {
		st.reject("bad_packet", err)
		return
	}
	if to != st.cfg.Incarnation {
		st.reject("wrong_incarnation", fmt.Errorf("rank %d datagram for incarnation %#x of this rank, which is %#x", f.Sender, to, st.cfg.Incarnation))
		return
	}
	if f.Incarnation > p.Inc { // restarted at the same address
		old := p.Inc
		p.Inc = f.Incarnation
		st.peerRestarted(f.Sender, old)
	}
	if h.kind == kindHeartbeat {
		st.onHeartbeat(f.Sender, h.seq)
		return
	}
	st.onPacket(f.Sender, h, frag)
}

// onHeartbeat stores a heartbeat datagram's sequence number into the slot
// word. One that does not move the word forwards is counted in
// Rejected["old_heartbeat"]: a replay, or a datagram overtaken by a later
// heartbeat (an RDMA write, or the write of a stalled link it doubled).
func (t *Transport) onHeartbeat(from ranks.Rank, seq uint64) {
	w := t.hbs.Word(from)
	for {
		old := atomic.LoadUint64(w)
		if seq <= old {
			t.reject("old_heartbeat", fmt.Errorf("rank %d heartbeat %d, its slot word is at %d", from, seq, old))
			return
		}
		if atomic.CompareAndSwapUint64(w, old, seq) {
			t.hbRecv.Add(1)
			return
		}
	}
}

func reasonOr(err error, def string) string {
	if r := wire.ReasonOf(err); r != "" {
		return r
	}
	return def
}

// reject counts a dropped datagram by reason and logs at most once per
// second per reason (duplicates and old heartbeats, which a lost ack or a
// late datagram also makes, at debug level).
func (t *Transport) reject(reason string, err error) {
	t.rejMu.Lock()
	t.rejected[reason]++
	t.rejMu.Unlock()
	level := slog.LevelWarn
	if reason == "duplicate" || reason == "old_heartbeat" {
		level = slog.LevelDebug
	}
	t.logLimited("reject:"+reason, level, "datagram rejected", "reason", reason, "err", err)
}

func (t *Transport) logLimited(key string, level slog.Level, msg string, args ...any) {
	now := time.Now()
	t.rejMu.Lock()
	if last, ok := t.lastLog[key]; ok && now.Sub(last) < time.Second {
		t.rejMu.Unlock()
		return
	}
	t.lastLog[key] = now
	t.rejMu.Unlock()
	t.log.Log(context.Background(), level, msg, args...)
}

// Stats implements transport.Transport. HeartbeatsRecv counts only the
// heartbeat datagrams that moved the slot word: an RDMA write lands in the
// slot without the observer's CPU knowing, and a datagram whose sequence
// number the word had passed is counted in Rejected["old_heartbeat"].
// Rejected["duplicate"] counts DATA packets received again: replays, and
// retransmissions of packets whose ack was lost or late.
func (t *Transport) Stats() transport.Stats {
	s := transport.Stats{
		MsgsSent: t.msgsSent.Load(), MsgsRecv: t.msgsRecv.Load(),
		BytesSent: t.bytesSent.Load(), BytesRecv: t.bytesRecv.Load(),
		HeartbeatsSent: t.udHeartbeats.Load() + t.rcWrites.Load(), HeartbeatsRecv: t.hbRecv.Load(),
		MsgsDropped: t.msgsDropped.Load(), HeartbeatsDropped: t.hbDropped.Load(),
	}
	t.rejMu.Lock()
	s.Rejected = make(map[string]uint64, len(t.rejected))
	for k, v := range t.rejected {
		s.Rejected[k] = v
	}
	t.rejMu.Unlock()
	return s
}

// VerbsStats are the counters specific to the verbs transport.
type VerbsStats struct {
	// RCWrites are heartbeats written with RDMA WRITE; UDHeartbeats those
	// sent as datagrams (before a link was up, or after it failed).
	RCWrites, UDHeartbeats uint64
	// RCErrors counts heartbeat links that failed (a write completed in
	// error): evidence about the observer, never a suspicion by itself.
	RCErrors uint64
	// LinksUp counts heartbeat RC links established.
	LinksUp uint64
	// AsyncEvents counts the device's asynchronous events read, PortErrors
	// those saying the port went down.
	AsyncEvents, PortErrors uint64
	// LateUD counts heartbeats also sent as datagrams because the RC
	// link's writes had stopped completing (the observer's end or the path
	// gone, the device's retries not yet given up).
	LateUD uint64
	// Retransmits counts datagrams of the reliable channel sent again
	// because their ack did not come within the retransmission timeout.
	Retransmits uint64
	// Restarts counts peers seen restarting (a newer incarnation, through
	// SetPeers or its datagrams): each reset their state (peerRestarted).
	Restarts uint64
	// RCMsgLinks counts RC message links established, RCMsgEvicted those
	// closed to make room for another peer (rcmsg.go).
	RCMsgLinks, RCMsgEvicted uint64
	// RCMsgErrors counts message links broken by an error (a completion
	// in error, a failed post) and receive errors; RCMsgResent counts
	// messages sent again over UD because a link broke before confirming
	// them. None is lost or delivered twice.
	RCMsgErrors, RCMsgResent uint64
	// Failed says why the transport failed for good (a UD QP, CQ or device
	// error; "" while it works): it sends no heartbeat and no message any
	// more, so its observer suspects it (fail-stop). See Failure.
	Failed string
}

// VerbsStats returns the verbs-specific counters.
func (t *Transport) VerbsStats() VerbsStats {
	s := VerbsStats{RCWrites: t.rcWrites.Load(), UDHeartbeats: t.udHeartbeats.Load(),
		RCErrors: t.rcErrors.Load(), LinksUp: t.linksUp.Load(), AsyncEvents: t.asyncEvents.Load(),
		PortErrors: t.portErrors.Load(), LateUD: t.lateUD.Load(), Retransmits: t.locked.rel.resent.Load(), // rel is set by Open
		Restarts:   t.restarts.Load(),
		RCMsgLinks: t.rcLinksUp.Load(), RCMsgEvicted: t.rcEvicted.Load(), RCMsgErrors: t.rcMsgErrors.Load(),
		RCMsgResent: t.rcResent.Load()}
	if err := t.Failure(); err != nil {
		s.Failed = err.Error()
	}
	return s
}

// Resources is what one transport holds on the device and in registered
// memory.
type Resources struct {
	// QPs counts queue pairs: the UD QP plus the RC QPs of heartbeat
	// links (active, pending and passive ends).
	QPs int
	// AHs counts address handles (one per rank messaged so far).
	AHs int
	// Objects counts every live verbs object (PD, MRs, CQs, QPs, AHs,
	// receive ring, writers).
	Objects int
	// RegisteredBytes is the registered memory: slot array, receive
	// ring, send buffers (and, once a message link was asked for, the
	// shared receive and RC send buffers).
	RegisteredBytes int
}

// Resources returns the transport's current resource use.
func (t *Transport) Resources() Resources {
	slot := (t.mtu + ibv.GRHSize + 63) &^ 63
	reg := t.slots.Len() + recvDepth*slot + t.sendMR.Len()
	if t.rcMsgBufs.Load() {
		reg += 2 * srqDepth * rcBuf // receive and send buffers
	}
	return Resources{QPs: 1 + int(t.rcQPs.Load()), AHs: int(t.ahs.Load()), Objects: t.ctx.Live(),
		RegisteredBytes: reg}
}

// Close implements transport.Transport: it stops the goroutines, frees
// every verbs object explicitly, checks that none is left (a leak is an
// error) and closes the device. The emitter must no longer call
// SendHeartbeat.
func (t *Transport) Close() error {
	if t.closed.Swap(true) {
		return nil
	}
	close(t.quit)
	if t.started {
		t.eng.wake() // the eventfd stays readable: a sleep after this returns at once
	}
	t.wg.Wait()
	// A Send that took t.mu before the engine stopped finishes first; one
	// that comes later finds the transport closed.
	t.mu.Lock()
	defer t.mu.Unlock()
	st := &t.locked // not through acquire: the to-do list is dropped, not run
	st.drainLinker()
	t.dropCmds()
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for i := range t.links {
		if l := t.links[i].Swap(nil); l != nil {
			add(l.free())
		}
	}
	for _, l := range t.takeGrave() {
		add(l.free())
	}
	for r, p := range st.pending {
		add(p.close())
		delete(st.pending, r)
	}
	for _, p := range st.passive {
		add(t.closePassive(p))
	}
	st.passive = nil
	if st.ml != nil {
		add(t.closeMsgLinks(st.ml))
		st.ml = nil
	}
	add(t.ud.SetError()) // flush posted receives before freeing their buffers
	add(t.ring.Close())
	for i, d := range st.dests {
		if d != nil {
			add(d.AH.Close())
			st.dests[i] = nil
			t.ahs.Add(-1)
		}
	}
	for _, ah := range st.oldAHs {
		add(ah.Close())
		t.ahs.Add(-1)
	}
	st.oldAHs = nil
	add(t.ud.Close())
	for _, c := range []interface{ Close() error }{t.sendMR, t.slots, t.sendQ, t.recvQ, t.pcq, t.pd} {
		add(c.Close())
	}
	if n := t.ctx.Live(); n != 0 {
		errs = append(errs, fmt.Errorf("verbs transport: %d verbs objects still open after Close (leak)", n))
	}
	add(t.ctx.Close())
	add(unix.Close(t.eng.efd))
	return errors.Join(errs...)
}

func now() int64 { return time.Now().UnixNano() }
