package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/internal/limit"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// Event reports that a rank is gone, once per rank on every node.
type Event struct {
	// Rank is the rank that died or left.
	Rank ranks.Rank
	// Left is true for a clean departure, false for a crash.
	Left bool
	// Detector is the rank whose observer found it (or was told), or Rank
	// itself for a crash learned from an agreement's decided dead set.
	Detector ranks.Rank
	// DetectedAt is the detector's wall-clock time of detection.
	DetectedAt time.Time
	// DeliveredAt is when this node learned it (wall clock), and
	// DeliveredMono the same instant on CLOCK_MONOTONIC in nanoseconds.
	DeliveredAt   time.Time
	DeliveredMono int64
}

// Status is a snapshot of the node's ring position.
type Status struct {
	Emitter, Observer ranks.Rank
	Dead              []ranks.Rank
	Left              bool
}

// Stats counts the node's activity.
type Stats struct {
	Transport transport.Stats
	Emitter   heartbeat.EmitterStats
	// BcastsStarted, BcastsForwarded count broadcasts this node started and
	// broadcast messages it sent on behalf of others.
	BcastsStarted, BcastsForwarded uint64
	// SyncsSent counts the SYNC requests, answers and ring pushes of the
	// dead-list repair (detector/repair.go): messages outside seed 000's
	// algorithm; SyncsPushed the ring pushes among them.
	SyncsSent, SyncsPushed uint64
	// BadMessages counts payloads that failed to decode or made no sense.
	BadMessages uint64
	// ProcessRT says whether Config.RealTimeProcess was granted.
	ProcessRT bool
	// LoopWakes counts the event loop's wake-ups (messages, requests,
	// timers and the checks' alarm): in a quiet job, none.
	LoopWakes uint64
	// DeathsLearned and Departures count the crashes and the clean
	// departures this node learned (Events), each rank once; Reported
	// counts those crashes its own observer detected.
	DeathsLearned, Departures, Reported uint64
	// AgreementsDecided counts the agreement decisions this node reached.
	AgreementsDecided uint64
	// AgreeReturned counts the Agree, AgreeID and Shrink calls that
	// returned a decision, AgreeLatencyNs their total time and
	// AgreeMaxLatencyNs the longest, in nanoseconds.
	AgreeReturned, AgreeLatencyNs uint64
	AgreeMaxLatencyNs             int64
	// ByKind counts the protocol messages and their bytes per kind, in
	// the order of MsgKinds.
	ByKind [NumMsgKinds]KindStats
	// LaneProbes counts the PROBEs sent to the emitter because it was
	// silent while its heartbeat socket dropped datagrams (lane.go).
	LaneProbes uint64
}

// OpenTransport creates the node's transport once the node knows where
// heartbeats must land (slots) and who receives messages (h).
type OpenTransport func(slots *transport.Slots, h transport.Handler) (transport.Transport, error)

// Node is one running failure detector.
type Node struct {
	cfg   Config
	log   *slog.Logger
	tr    transport.Transport
	slots *transport.Slots
	// drain collects heartbeats waiting in tr's socket before each check
	// (transport.Drainer; nil when they land in the slots directly).
	drain func()
	// lives reads other ranks' life words (transport.LifeWords; nil when
	// tr maps no other rank's memory).
	lives     transport.LifeWords
	lifeWords []uint64         // feedLife's, reused
	stallSeen int64            // the heartbeat thread's last late wake-up handed to the detector (Core.Stalled)
	watch     *heartbeat.Watch // the observer's checks, run on the emitter thread
	heldP     bool             // the emitter holds a P: GOMAXPROCS raised by one
	em        *heartbeat.Emitter
	// processRT: Config.RealTimeProcess was granted (set by Start).
	processRT bool

	// Owned by the event loop: the detector (ring, broadcast, repair,
	// zombies, agreements) and the callers waiting for decisions.
	core    *detector.Core
	waiters map[agreeKey]chan Agreement

	evicted    chan struct{}
	isEvicted  atomic.Bool
	isMinority atomic.Bool // the stop was the quorum rule's (Minority)

	inbox chan inbound
	alarm chan struct{} // the checks saw the emitter silent for silence
	// silence is the watch's alarm (ns): MendEarly with the early probes,
	// else δ; at most δ, so the alarm comes no later than SUSP-TIMEOUT's
	// expiry.
	silence int64
	lane    laneGuard  // owned by the loop (lane.go)
	laneLog *limit.Log // its log line, once a second at most
	reqs    chan func()
	quit    chan struct{}
	done    chan struct{}

	rec  atomic.Pointer[Record] // record.go: published by the loop
	evCh chan Event             // Events: one channel, Size events deep

	started, forwarded, bad, syncsSent, syncsPushed, wakes atomic.Uint64 // published by flush
	undecodable                                            atomic.Uint64 // payloads handle could not decode
	learned, departed, reported                            atomic.Uint64 // published by flush
	decisions                                              atomic.Uint64 // updated by decided
	agreeN, agreeNs                                        atomic.Uint64 // updated by agree1
	agreeMaxNs                                             atomic.Int64
	laneProbes                                             atomic.Uint64             // lane.go
	kinds                                                  [NumMsgKinds]kindCounters // kinds.go
	closeOnce                                              sync.Once
}

type inbound struct {
	from ranks.Rank
	msg  wire.Message
}

// warmTimeout bounds the wait for each ring neighbour's heartbeat path at
// the start (transport.Warmer).
const warmTimeout = 10 * time.Second

// Start validates cfg, opens the transport and starts the emitter thread and
// the event loop. The ring's first suspicion deadline is StartGrace away,
// counted once the transport set up its heartbeat paths to this rank's
// observer and from its emitter (transport.Warmer), which an overloaded
// host may take seconds to do.
func Start(cfg Config, open OpenTransport) (*Node, error) {
	return StartFenced(cfg, open, nil)
}

// StartFenced is Start with a start fence: once the heartbeat thread runs
// it calls fence (a barrier of the whole job, such as a second bootstrap
// exchange) and counts StartGrace from its return, so that no rank's first
// suspicion deadline can expire before every rank's heartbeat thread has
// started. A job whose ranks come up slowly (an overloaded host, a slow
// launch) is then slow to start, never reported. If fence fails, so does
// StartFenced. A nil fence is Start.
func StartFenced(cfg Config, open OpenTransport, fence func() error) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	overlay, gossip, _ := cfg.propagation()
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger.With("rank", cfg.Rank),
		slots:   cfg.Slots,
		waiters: map[agreeKey]chan Agreement{},
		inbox:   make(chan inbound, 1024),
		alarm:   make(chan struct{}, 1),
		reqs:    make(chan func()),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		evicted: make(chan struct{}),
		evCh:    make(chan Event, cfg.Size),
	}
	if n.slots == nil {
		n.slots = transport.NewSlots(cfg.Size)
	}
	n.rec.Store(&Record{changed: make(chan struct{})})
	// The checks wake the loop when the emitter's silence reaches
	// MendEarly (block mending's early probes), or δ without them: while
	// the emitter is heard the loop needs no wake-up of its own
	// (detector.Core.NextWake), and a quiet job never rings it.
	n.silence = int64(cfg.SuspectTimeout)
	if cfg.MendProbe > 0 && cfg.MendEarly > 0 {
		n.silence = int64(cfg.MendEarly)
	}
	var err error
	n.core, err = detector.NewCore(detector.Config{Self: cfg.Rank, Size: cfg.Size,
		SuspectTimeout: int64(cfg.SuspectTimeout), Overlay: overlay, Gossip: gossip, Zombies: true, Probe: max(cfg.MendProbe, 0), ProbeAfter: int64(max(cfg.MendEarly, 0)),
		Hosts:       hb.HostLabels(cfg.Hosts),
		CheckPeriod: int64(cfg.CheckPeriod), Alarm: n.silence, Housekeeping: int64(cfg.housekeeping()),
		AgreeOps: cfg.AgreeOps, AgreeTree: cfg.AgreeTree, AgreeRebalance: cfg.AgreeRebalance,
		AgreeResend: int64(cfg.AgreeResend), Partition: cfg.Partition})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	priority := 1
	if cfg.RealTime && cfg.RealTimeProcess {
		// Before the transport starts its goroutines: threads made later
		// inherit the policy.
		if k, err := heartbeat.SetProcessRealTime(1); err != nil {
			n.log.Warn("node: whole process real-time refused; only the heartbeat thread asks for it", "err", err)
		} else {
			n.processRT = true
			priority = 2
			n.log.Debug("node: process SCHED_RR", "threads", k)
		}
	}
	if n.tr, err = open(n.slots, n.handle); err != nil {
		return nil, fmt.Errorf("node: opening transport: %w", err)
	}
	if d, ok := n.tr.(transport.Drainer); ok {
		n.drain = d.DrainHeartbeats
	}
	if l, ok := n.tr.(transport.LifeWords); ok {
		n.lives = l
	}
	if l, ok := n.tr.(transport.LaneDrops); ok {
		n.lane.drops = l.HeartbeatLaneDrops
	}
	n.laneLog = limit.NewLog(n.log, time.Second)
	n.watch = heartbeat.NewWatch(n.slots, int64(max(cfg.SuspectTimeout/2, 3*cfg.CheckPeriod)))
	n.watch.SetAlarm(n.silence, func() {
		select {
		case n.alarm <- struct{}{}:
		default:
		}
	})
	cpu := -1
	if cfg.PinEmitter {
		cpu = cfg.EmitterCPU
	}
	ecfg := heartbeat.EmitterConfig{
		Period:   int64(cfg.HeartbeatPeriod),
		CPU:      cpu,
		RealTime: cfg.RealTime,
		Priority: priority,
		HoldP:    cfg.EmitterHoldsP,
		Send:     n.tr.SendHeartbeat,

		Watch:      n.watch,
		Drain:      n.drain,
		CheckEvery: cfg.checkEvery(),
		Life:       n.slots.Word(cfg.Rank), // this rank's own slot: its life word
	}
	if sink, sign, verify := nativeSinks(n.tr); sink != nil && !cfg.GoEmitter {
		ecfg.Sink, ecfg.Sign, ecfg.HoldP = sink, sign, false // the thread runs in C
		if f, ok := n.tr.(transport.HeartbeatFD); ok {
			ecfg.DrainFD = f.HeartbeatFD()
		}
		if ecfg.DrainFD > 0 {
			ecfg.Verify = verify
			if l, ok := n.tr.(transport.HeartbeatLanes); ok {
				ecfg.Sweep, ecfg.SweepFD = l.SweepHeartbeats, l.HeartbeatSweepFD()
			}
		}
		_, worder := n.tr.(transport.Worder)
		ecfg.DatagramsOnly = !worder
	}
	n.heldP = ecfg.HoldP
	if n.em, err = heartbeat.NewEmitter(ecfg); err != nil {
		n.tr.Close()
		return nil, err
	}
	if l, ok := n.tr.(transport.HeartbeatLanes); ok {
		l.SetHeartbeatRebind(n.em.Rebind) // frames signed in advance name their receiver's incarnation
	}
	if n.heldP {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
	abort := func(err error) (*Node, error) {
		close(n.quit) // frees the transport's handlers blocked on the inbox
		n.em.Close()
		if n.heldP {
			runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)-1))
		}
		n.tr.Close()
		return nil, err
	}
	n.core.Start(mono(), int64(cfg.StartGrace))
	n.flush() // points the checks and the heartbeat thread
	if err := n.em.Start(); err != nil {
		return abort(err)
	}
	// The loop is not running yet: no check's record reaches the Core
	// before the grace is armed again, once the heartbeat paths to the
	// observer and from the emitter are set up and the fence passed.
	if w, ok := n.tr.(transport.Warmer); ok {
		w.Warm(warmTimeout, n.core.Observer(), n.core.Emitter())
	}
	if fence != nil {
		if err := fence(); err != nil {
			return abort(fmt.Errorf("node: start fence: %w", err))
		}
	}
	n.core.Arm(mono(), int64(cfg.StartGrace))
	go n.loop()
	return n, nil
}

// Rank returns this node's rank.
func (n *Node) Rank() ranks.Rank { return n.cfg.Rank }

// Size returns the job's number of ranks.
func (n *Node) Size() int { return n.cfg.Size }

// handle is the transport's Handler: decode, then hand to the loop.
func (n *Node) handle(from ranks.Rank, payload []byte) {
	m, err := wire.DecodeMessage(payload, n.cfg.Size)
	if err != nil {
		n.undecodable.Add(1)
		n.log.Warn("dropping malformed message", "from", from, "err", err)
		return
	}
	n.countRecv(m.Type(), len(payload))
	select {
	case n.inbox <- inbound{from, m}:
	case <-n.quit:
	}
}

// loop is the event loop, the Core's one driver: it waits for the
// earliest of a message, a request, the watch's alarm (the emitter silent
// for n.silence) and the Core's NextWake; then it ticks the Core, hands it
// the messages waiting and the checks' latest record, and flushes. In a
// quiet job it does not wake at all.
func (n *Node) loop() {
	defer close(n.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := mono()
		wake := time.Hour // evicted: nothing to look at any more
		if !n.core.Evicted() {
			t := detector.Time{Mono: now, Wall: time.Now().UnixNano()}
			n.feedLife(t) // a probe round about to close sees the latest words
			if at, late := n.em.LastLate(); at > n.stallSeen {
				n.stallSeen = at
				n.core.Stalled(t, late) // stopped or starved: distrust, then check the dead list
			}
			n.core.Tick(t)
			n.receivePending() // answers already here count before a probe round closes
			rec := n.watch.Record()
			n.core.Observe(t, rec)
			n.flush()
			if at := n.core.NextWake(now); at != detector.Never {
				wake = min(time.Duration(at-now), time.Hour)
			}
			wake = min(wake, n.guardLane(now, rec))
		}
		timer.Reset(wake)
		n.wakes.Add(1)
		select {
		case <-n.quit:
			return
		case <-timer.C:
		case <-n.alarm:
		case in := <-n.inbox:
			n.receive(in)
		case req := <-n.reqs:
			req()
			n.flush()
		}
	}
}

// nativeSinks returns how the native heartbeat thread reaches an observer
// through tr: a store into its shared memory on this host, else a datagram
// signed in advance; and how it authenticates the datagrams it receives
// without Go. It returns nil, for the Go thread, unless tr has datagrams
// and either shared memory (shared memory over TCP) or that verification
// (UDP alone): over verbs, heartbeats to other hosts would enter Go at
// every period; over UDP without the verification, collecting the
// observer's datagrams would need Go at every check, where the Go thread
// measured as cheap or cheaper (docs/results/detector.md).
func nativeSinks(tr transport.Transport) (heartbeat.SinkFunc, heartbeat.SignFunc, transport.HeartbeatVerifier) {
	d, ok := tr.(transport.Datagrams)
	if !ok {
		return nil, nil, nil
	}
	sign := d.HeartbeatSigner()
	if sign == nil {
		return nil, nil, nil
	}
	verify := verifier(tr)
	w, worder := tr.(transport.Worder)
	if !worder && verify == nil {
		return nil, nil, nil
	}
	return func(to ranks.Rank) (heartbeat.Sink, bool) {
		if worder {
			if p := w.HeartbeatWord(to); p != nil {
				return heartbeat.Sink{Word: p}, true
			}
		}
		if fd, addr, ok := d.HeartbeatDest(to); ok {
			return heartbeat.Sink{FD: fd, Addr: addr}, true
		}
		return heartbeat.Sink{}, false
	}, sign, verify
}

// verifier returns tr's heartbeat verification, or nil when tr (or the
// transport it wraps, for a wrapper that forwards it) has none.
func verifier(tr transport.Transport) transport.HeartbeatVerifier {
	v, ok := tr.(transport.HeartbeatVerifier)
	for ok {
		w, wraps := tr.(interface{ Inner() transport.Transport })
		if !wraps {
			return v
		}
		tr = w.Inner()
		_, ok = tr.(transport.HeartbeatVerifier)
	}
	return nil
}

// feedLife hands the detector the life words it wants (detector/life.go),
// as far as the transport maps them.
func (n *Node) feedLife(now detector.Time) {
	if n.lives == nil {
		return // the transport maps no other rank's memory
	}
	rs := n.core.WantLife(now)
	if rs == nil {
		return
	}
	words := n.lifeWords[:0]
	for _, r := range rs {
		var w uint64
		if p := n.lives.LifeWord(r); p != nil {
			w = atomic.LoadUint64(p)
		}
		words = append(words, w)
	}
	n.lifeWords = words
	n.core.Life(now, rs, words)
	if r, ok := n.core.WantRunnable(now); ok && n.lives.Runnable(r) {
		n.core.Runnable(now, r)
	}
}

// flush hands the detector the life words and the heartbeat words it
// wants (its zombie check) and carries out what it asked for
// (detector.Ready): point the heartbeat thread and the checks, send,
// publish events and decisions, log.
func (n *Node) flush() {
	if n.lives != nil {
		n.feedLife(detector.Time{Mono: mono(), Wall: time.Now().UnixNano()})
	}
	if rs := n.core.WantWords(); rs != nil {
		words := make([]uint64, len(rs))
		for i, r := range rs {
			words[i] = n.slots.Load(r)
		}
		n.core.Words(detector.Time{Mono: mono(), Wall: time.Now().UnixNano()}, rs, words)
	}
	rd := n.core.Ready()
	if rd.Empty() {
		return
	}
	st := n.core.Stats() // counted by now: before the events go out
	n.started.Store(st.BcastsStarted)
	n.forwarded.Store(st.BcastsForwarded)
	n.syncsSent.Store(st.SyncsSent)
	n.syncsPushed.Store(st.SyncsPushed)
	n.bad.Store(st.BadMessages)
	n.learned.Store(st.DeathsLearned)
	n.departed.Store(st.Departures)
	n.reported.Store(st.Reported)
	if rd.Watch {
		if l, ok := n.tr.(transport.HeartbeatLanes); ok {
			l.WatchHeartbeats(rd.Emitter) // the emitter's heartbeats in a socket of their own
		}
		n.watch.Set(rd.Emitter, mono())
	}
	if rd.Retarget {
		if rd.Alone {
			n.em.Pause()
		} else {
			n.em.SetObserver(rd.Observer)
		}
	}
	for _, s := range rd.Sends {
		n.sendAll(s.To, s.Msg)
	}
	if len(rd.Events) > 0 || rd.Evicted {
		n.publish(rd.Evicted, rd.Minority) // before Events and Evicted tell of it
	}
	for _, e := range rd.Events { // the Core delivers each rank once
		n.evCh <- nodeEvent(e) // never blocks: it holds Size events, and a rank goes once
	}
	for _, d := range rd.Decisions {
		n.decided(d) // agree.go
	}
	if n.cfg.OnNote != nil {
		for _, note := range rd.Notes {
			n.cfg.OnNote(note)
		}
	}
	for _, l := range rd.Logs {
		n.log.Log(context.Background(), l.Level, l.Msg, l.Args...)
	}
	if rd.Minority {
		n.isMinority.Store(true) // before Evicted is closed
	}
	if rd.Evicted && !n.isEvicted.Swap(true) {
		n.em.Pause()
		close(n.evicted)
	}
}

// receivePending handles the messages already waiting in the inbox.
func (n *Node) receivePending() {
	for range len(n.inbox) {
		n.receive(<-n.inbox)
	}
}

func (n *Node) receive(in inbound) {
	n.core.Step(detector.Time{Mono: mono(), Wall: time.Now().UnixNano()}, in.from, in.msg)
	n.flush()
}

func (n *Node) sendAll(to []ranks.Rank, m wire.Message) {
	if len(to) == 0 {
		return
	}
	// One buffer sized for a broadcast's usual encoding, not grown field by
	// field; the transports share it between the destinations.
	payload := wire.AppendMessage(make([]byte, 0, 64), m)
	for _, r := range to {
		if err := n.send(r, m.Type(), payload); err != nil && !errors.Is(err, transport.ErrClosed) {
			n.log.Warn("send failed", "to", r, "err", err)
		}
	}
}

// send hands one encoded message of type t to the transport for to and
// counts it by kind once the transport took it.
func (n *Node) send(to ranks.Rank, t wire.MsgType, payload []byte) error {
	err := n.tr.Send(to, payload)
	if err == nil {
		n.countSent(t, len(payload))
	}
	return err
}

// TransportFailure returns why the transport failed for good (see
// transport.Failer), or nil while it works or when it cannot fail so. A
// node whose transport failed is silent: the job evicts it, and the
// process should exit as a crashed one would.
func (n *Node) TransportFailure() error {
	if f, ok := n.tr.(transport.Failer); ok {
		return f.Failure()
	}
	return nil
}

// Evicted is closed when this node learns that the job declared it dead
// (it was paused or cut off for longer than δ), or when it stops on its own
// as a minority (Minority). The node then stops taking part: the process
// should exit, as a crashed one would have.
func (n *Node) Evicted() <-chan struct{} { return n.evicted }

// Minority reports whether this node stopped on its own because it held
// most of the job's membership dead (Config.Partition): it was on the
// minority side of a partition, or the job lost most of its ranks at
// once. Evicted is closed then too; Minority is set before it is.
func (n *Node) Minority() bool { return n.isMinority.Load() }

// Events returns the node's event channel: it receives every failure or
// departure this node learns, since Start, each exactly once. Every call
// returns the same channel (as context.Context's Done), so it may be called
// in a select loop; events are not replayed to a second reader (use Dead
// or Known for the state so far). Its buffer holds Size events, so the
// node never waits for a reader: a rank is reported at most once. It is
// closed by Close.
func (n *Node) Events() <-chan Event { return n.evCh }

// Dead returns the ranks this node knows are gone (crashed or departed),
// in increasing order (from its Record).
func (n *Node) Dead() []ranks.Rank {
	r := n.Record()
	d := make([]ranks.Rank, r.Len())
	for i := range d {
		d[i] = r.Rank(i)
	}
	return d
}

// Known returns the event for rank r, if this node knows it is gone (from
// its Record).
func (n *Node) Known(r ranks.Rank) (Event, bool) { return n.Record().Known(r) }

// do runs f on the event loop and waits for it.
func (n *Node) do(ctx context.Context, f func()) error {
	ran := make(chan struct{})
	select {
	case n.reqs <- func() { f(); close(ran) }:
	case <-n.done:
		return transport.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	<-ran
	return nil
}

// Status returns the node's ring position and dead list.
func (n *Node) Status() (Status, error) {
	var s Status
	err := n.do(context.Background(), func() {
		s = Status{Emitter: n.core.Emitter(), Observer: n.core.Observer(),
			Dead: slices.Clone(n.core.Dead().Members())}
	})
	return s, err
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	tr, em := n.tr.Stats(), n.em.Stats()
	tr.HeartbeatsSent += em.NativeSent // sent by the native thread, past the transport's counters
	tr.HeartbeatsDropped += em.Dropped
	tr.HeartbeatsRecv += em.Verified // received and authenticated by the native thread
	if em.OldSeen > 0 {
		if tr.Rejected == nil {
			tr.Rejected = map[string]uint64{}
		}
		tr.Rejected[wire.ReasonOldHeartbeat] += em.OldSeen
	}
	return Stats{
		Transport:       tr,
		Emitter:         em,
		BcastsStarted:   n.started.Load(),
		BcastsForwarded: n.forwarded.Load(),
		SyncsSent:       n.syncsSent.Load(),
		SyncsPushed:     n.syncsPushed.Load(),
		BadMessages:     n.bad.Load() + n.undecodable.Load(),
		ProcessRT:       n.processRT,
		LoopWakes:       n.wakes.Load(),

		DeathsLearned:     n.learned.Load(),
		Departures:        n.departed.Load(),
		Reported:          n.reported.Load(),
		AgreementsDecided: n.decisions.Load(),
		AgreeReturned:     n.agreeN.Load(),
		AgreeLatencyNs:    n.agreeNs.Load(),
		AgreeMaxLatencyNs: n.agreeMaxNs.Load(),
		ByKind:            n.byKind(),
		LaneProbes:        n.laneProbes.Load(),
	}
}

// Publish broadcasts payload (at most bcast.MaxPayload bytes) to every
// rank not known dead, with the same overlay and tolerance as a failure;
// each receives it once through Config.OnNote. It reports false when no
// one is left to tell (this node is alone or evicted).
func (n *Node) Publish(ctx context.Context, payload []byte) (bool, error) {
	if len(payload) > bcast.MaxPayload {
		return false, fmt.Errorf("node: a note of %d bytes, at most %d", len(payload), bcast.MaxPayload)
	}
	var ok bool
	err := n.do(ctx, func() {
		ok = n.core.Publish(detector.Time{Mono: mono(), Wall: time.Now().UnixNano()}, payload)
	})
	return ok, err
}

// Leave departs cleanly: the observer is told, so that every node
// reports a departure rather than a crash. Call Close afterwards. The
// LEAVE goes out from the event loop as soon as the loop takes it, however
// busy it is (a whole job stopping at once on a loaded host); then Leave
// waits up to linger (or ctx) for it to be written and handled.
// Heartbeats go on while it lingers, so that an observer slow to handle
// the LEAVE still sees a live emitter, not a silent one; then they stop,
// and the rank's life word says it departed (hb.LifeDeparted), which an
// observer on this host takes as the LEAVE if that is late or lost. An
// evicted rank, or one alone, sends nothing and its word does not say so.
func (n *Node) Leave(ctx context.Context, linger time.Duration) error {
	var observer ranks.Rank
	var sendErr error
	// From the loop, before anything the loop sends after it: a LEAVE this
	// rank forwards next (its emitter's) must not overtake its own, or the
	// observer drops it.
	err := n.do(context.Background(), func() {
		var msg *wire.Leave
		var ok bool
		if observer, msg, ok = n.core.Leave(); ok {
			sendErr = n.send(observer, msg.Type(), wire.AppendMessage(nil, msg))
		} else {
			sendErr = errNotSent
		}
	})
	if err != nil {
		return err
	}
	if sendErr == errNotSent {
		n.do(context.Background(), n.em.Pause)
		return nil
	}
	defer n.do(context.Background(), n.em.Depart)
	if sendErr != nil {
		return fmt.Errorf("node: sending LEAVE to %d: %w", observer, sendErr)
	}
	// Transports write asynchronously; give the LEAVE time to go out.
	t := time.NewTimer(linger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// errNotSent: Leave had no LEAVE to send (alone, evicted, or left already).
var errNotSent = errors.New("node: no LEAVE to send")

// Close stops the event loop, the emitter thread and the transport, and
// waits for all of them. The Events channel is closed.
func (n *Node) Close() error {
	var err error
	n.closeOnce.Do(func() {
		close(n.quit)
		<-n.done
		n.em.Close()
		if n.heldP {
			runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)-1))
		}
		err = n.tr.Close()
		close(n.evCh) // after the loop: nothing delivers any more
	})
	return err
}
