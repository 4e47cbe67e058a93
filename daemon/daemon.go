package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// Daemon is one node's daemon.
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	tr    *tcp.Transport
	slots *transport.Slots
	em    *heartbeat.Emitter
	table *HeartbeatTable
	ln    *net.UnixListener

	// Owned by the loop.
	ring   *hb.Ring
	prop   *Propagation
	locals map[ranks.Rank]*local
	free   []int // free heartbeat slots
	past   []Event
	// Fail-stop of daemons: daemons in D whose slot word must not move.
	zombies *hb.Zombies
	evicted chan struct{}

	inbox  chan inbound
	gone   chan localGone
	attach chan attachReq
	detach chan detachReq
	reqs   chan func()
	quit   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	conns     map[*net.UnixConn]struct{} // local connections, closed by Close
	subs      []chan Event
	closing   bool
	bad       atomic.Uint64
	closeOnce sync.Once
}

type inbound struct {
	from ranks.Rank
	msg  wire.DaemonMessage
}

// Start validates cfg, starts the daemons' transport, the heartbeat thread,
// the local socket and the hosted processes (cfg.Spawn), and the loop.
func Start(cfg Config) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	l := cfg.Layout
	ring, err := hb.NewRing(hb.RingConfig{Self: cfg.Node, N: l.Nodes, Delta: int64(cfg.SuspectTimeout),
		StallGuard: int64(max(cfg.SuspectTimeout/2, 3*cfg.CheckPeriod)), Confirm: 2})
	if err != nil {
		return nil, err
	}
	prop, err := NewPropagation(cfg.Node, l)
	if err != nil {
		return nil, err
	}
	d := &Daemon{
		cfg: cfg, log: cfg.Logger.With("node", cfg.Node), slots: transport.NewSlots(l.Nodes),
		ring: ring, prop: prop, locals: map[ranks.Rank]*local{},
		zombies: hb.NewZombies(), evicted: make(chan struct{}),
		inbox: make(chan inbound, 1024), gone: make(chan localGone, 64),
		attach: make(chan attachReq), detach: make(chan detachReq), reqs: make(chan func()),
		quit: make(chan struct{}), done: make(chan struct{}), conns: map[*net.UnixConn]struct{}{},
	}
	if d.table, err = NewHeartbeatTable(max(l.PPN, 1)); err != nil {
		return nil, err
	}
	for i := l.PPN - 1; i >= 0; i-- {
		d.free = append(d.free, i)
	}
	fail := func(err error) (*Daemon, error) {
		d.shutdown()
		return nil, err
	}
	d.tr, err = tcp.Listen(tcp.Config{Self: cfg.Node, N: l.Nodes, JobID: cfg.JobID, Key: cfg.Key,
		ListenAddr: cfg.Listen, Slots: d.slots, Handler: d.handle, Logger: d.log})
	if err != nil {
		return fail(err)
	}
	peers := cfg.Peers
	if cfg.Exchange != nil {
		if peers, err = cfg.Exchange(d.tr.Addr()); err != nil {
			return fail(fmt.Errorf("daemon: address exchange: %w", err))
		}
		if len(peers) != l.Nodes {
			return fail(fmt.Errorf("daemon: address exchange gave %d addresses for %d nodes", len(peers), l.Nodes))
		}
	}
	if err := d.tr.SetPeers(peers); err != nil {
		return fail(err)
	}
	cpu := -1
	if cfg.PinEmitter {
		cpu = cfg.EmitterCPU
	}
	d.em, err = heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: int64(cfg.HeartbeatPeriod), CPU: cpu, RealTime: cfg.RealTime,
		HoldP: cfg.HoldP, Send: d.tr.SendHeartbeat})
	if err != nil {
		return fail(err)
	}
	if cfg.Socket != "" {
		if d.ln, err = listenLocal(cfg.Socket); err != nil {
			return fail(err)
		}
		d.wg.Add(1)
		go d.serveLocal(d.ln)
	}
	now := node.Mono()
	for i, r := range l.Hosted(cfg.Node) {
		if len(cfg.Spawn) == 0 || (cfg.SpawnRanks > 0 && i >= cfg.SpawnRanks) {
			break
		}
		cmd, err := spawn(cfg.Spawn, r, cfg.Node, cfg.Socket, cfg.SpawnOut, cfg.SpawnOut)
		if err != nil {
			return fail(err)
		}
		d.locals[r] = &local{rank: r, pid: cmd.Process.Pid, child: cmd, slot: -1, lastProgress: now}
		d.wg.Add(1)
		go func(r ranks.Rank, cmd *exec.Cmd) {
			defer d.wg.Done()
			err := cmd.Wait()
			select {
			case d.gone <- localGone{r, cmd.Process.Pid, exitCause(err, cmd.ProcessState)}:
			case <-d.quit:
			}
		}(r, cmd)
	}
	d.ring.Start(now, int64(cfg.StartGrace))
	if !d.ring.Alone() {
		d.em.SetObserver(d.ring.Observer())
	}
	if cfg.HoldP {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	}
	d.em.Start()
	go d.loop()
	return d, nil
}

// Node returns this daemon's node index.
func (d *Daemon) Node() ranks.Rank { return d.cfg.Node }

// Addr returns the daemons' transport address of this daemon.
func (d *Daemon) Addr() string { return d.tr.Addr() }

// handle is the transport's Handler.
func (d *Daemon) handle(from ranks.Rank, payload []byte) {
	m, err := wire.DecodeDaemon(payload, d.cfg.Layout.Nodes, d.cfg.Layout.Procs())
	if err != nil {
		d.bad.Add(1)
		d.log.Warn("dropping malformed message", "from", from, "err", err)
		return
	}
	select {
	case d.inbox <- inbound{from, m}:
	case <-d.quit:
	}
}

func (d *Daemon) loop() {
	defer close(d.done)
	tick := time.NewTicker(d.cfg.CheckPeriod)
	defer tick.Stop()
	for {
		select {
		case <-d.quit:
			return
		case <-tick.C:
			if d.isEvicted() {
				continue
			}
			d.tr.DrainHeartbeats() // the heartbeats waiting in the UDP socket
			now := node.Mono()
			d.apply(d.ring.Check(now, d.slots.Load(d.ring.Emitter())))
			d.checkZombies(now)
			d.checkHangs(now)
		case in := <-d.inbox:
			d.receive(in)
		case g := <-d.gone:
			if lp := d.locals[g.rank]; lp != nil && lp.pid == g.pid {
				cause := g.cause
				if lp.bye {
					cause = Left
				}
				d.localFailed(lp, cause)
			}
		case a := <-d.attach:
			a.reply <- d.attachLocal(a)
		case f := <-d.reqs:
			f()
		case r := <-d.detach:
			if lp := d.locals[r.rank]; lp != nil && lp.cc == r.cc {
				d.detachLocal(lp, r.bye)
			}
		}
	}
}

// apply carries out what the ring core asked for.
func (d *Daemon) apply(out hb.Output) {
	if out.ObserverChanged {
		d.retarget()
	}
	if out.SendNewObserver {
		d.send(out.NewObserverTo, wire.AppendDaemon(nil, &wire.DaemonNewObserver{Observer: d.cfg.Node}))
	}
	if det := out.Detected; det != nil {
		// StartPropagation(E_id) for a daemon: it and its hosted processes.
		r, to, fresh := d.prop.StartNode(det.Dead, det.D, time.Now().UnixNano())
		d.recordDead(fresh.Nodes)
		d.log.Info("node failed", "dead", det.Dead, "next_emitter", d.ring.Emitter())
		d.broadcast(&r, to, fresh)
	}
}

func (d *Daemon) retarget() {
	if d.ring.Alone() {
		d.em.Pause()
		return
	}
	d.em.SetObserver(d.ring.Observer())
}

func (d *Daemon) receive(in inbound) {
	if d.isEvicted() {
		return
	}
	if m, ok := in.msg.(*wire.DaemonEvicted); ok {
		d.onEvicted(in.from, m)
		return
	}
	if d.ring.Dead().Has(in.from) {
		// A daemon we hold dead is talking: it was paused past δ and
		// resumed. Its node was reported down; it must stop.
		d.evict(in.from, node.Mono())
		return
	}
	switch m := in.msg.(type) {
	case *wire.DaemonNewObserver:
		if m.Observer != in.from {
			d.bad.Add(1)
			return
		}
		out, err := d.ring.NewObserver(node.Mono(), m.Observer)
		if err != nil {
			d.bad.Add(1)
			return
		}
		d.apply(out)
	case *Report:
		to, fresh, err := d.prop.Forward(*m, d.ring.Dead())
		if err != nil {
			d.bad.Add(1)
			return
		}
		if fresh.Empty() {
			return
		}
		if _, changed := d.ring.Learn(fresh.Nodes); changed { // seed 000 task T5
			d.retarget()
		}
		d.recordDead(fresh.Nodes)
		d.broadcast(m, to, fresh)
	}
}

// broadcast is ReliableBroadcast: the report to the daemons in to, then
// the fresh failures to every local process (the outer star) and to the
// daemon's own subscribers.
func (d *Daemon) broadcast(r *Report, to []ranks.Rank, fresh Fresh) {
	if len(to) > 0 {
		payload := wire.AppendDaemon(nil, r)
		for _, t := range to {
			d.send(t, payload)
		}
	}
	evs := events(fresh, d.cfg.Layout, r)
	now := node.Mono()
	for i := range evs {
		evs[i].DeliveredMono = now
	}
	for _, lp := range d.locals {
		if lp.cc != nil && !lp.gone {
			for _, ev := range evs {
				lp.cc.send(ev)
			}
		}
	}
	d.past = append(d.past, evs...)
	d.mu.Lock()
	for _, c := range d.subs {
		for _, ev := range evs {
			select {
			case c <- ev:
			default: // a subscriber that does not read loses events
			}
		}
	}
	d.mu.Unlock()
}

func (d *Daemon) send(to ranks.Rank, payload []byte) {
	if err := d.tr.Send(to, payload); err != nil && !errors.Is(err, transport.ErrClosed) {
		d.log.Warn("send failed", "to", to, "err", err)
	}
}

// Events returns a channel receiving every failure this daemon learns
// from now on. Its buffer holds one event per node and per rank, so it
// never fills (each is reported at most once). Closed by Close.
func (d *Daemon) Events() <-chan Event {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := make(chan Event, d.cfg.Layout.Procs()+d.cfg.Layout.Nodes+16)
	if d.closing {
		close(c)
	} else {
		d.subs = append(d.subs, c)
	}
	return c
}

// Locals returns the pid of each local process the daemon watches, by
// rank (nil once the daemon is closed).
func (d *Daemon) Locals() map[ranks.Rank]int {
	out := map[ranks.Rank]int{}
	ran := make(chan struct{})
	select {
	case d.reqs <- func() {
		for r, lp := range d.locals {
			if !lp.gone {
				out[r] = lp.pid
			}
		}
		close(ran)
	}:
		<-ran
		return out
	case <-d.done:
		return nil
	}
}

// Close stops the loop, the heartbeat thread, the transport and the local
// socket. Spawned processes are killed (they die with their node).
func (d *Daemon) Close() error {
	var err error
	d.closeOnce.Do(func() {
		close(d.quit)
		<-d.done
		err = d.shutdown()
	})
	return err
}

// shutdown releases what Start acquired.
func (d *Daemon) shutdown() error {
	var err error
	if d.em != nil {
		d.em.Close()
		if d.cfg.HoldP {
			runtime.GOMAXPROCS(max(1, runtime.GOMAXPROCS(0)-1))
		}
	}
	if d.ln != nil {
		d.ln.Close()
	}
	d.mu.Lock()
	d.closing = true // no new local connections
	for c := range d.conns {
		c.Close() // ends their readers, even mid-handshake
	}
	d.mu.Unlock()
	for _, lp := range d.locals {
		if lp.child != nil && lp.child.Process != nil {
			lp.child.Process.Kill()
		}
		d.release(lp)
	}
	if d.tr != nil {
		err = d.tr.Close()
	}
	select {
	case <-d.quit:
	default:
		close(d.quit)
	}
	d.wg.Wait()
	if d.table != nil {
		d.table.Close()
	}
	d.mu.Lock()
	for _, c := range d.subs {
		close(c)
	}
	d.subs = nil
	d.mu.Unlock()
	return err
}
