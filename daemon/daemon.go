package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// Config configures one node's daemon.
type Config struct {
	// Node is this daemon's index (its rank in the daemons' ring), Layout
	// the job's shape.
	Node   ranks.Rank
	Layout Layout
	// Peers are the daemons' TCP addresses, indexed by node; Listen is
	// this daemon's listen address (default Peers[Node], or 127.0.0.1:0
	// with Exchange).
	Peers  []string
	Listen string
	// Exchange, when Peers is nil, publishes this daemon's address and
	// returns every daemon's (a launcher's allgather, such as the PMIx
	// bootstrap's Exchange).
	Exchange func(addr string) ([]string, error)
	// JobID and Key authenticate the daemons' traffic (transport/tcp).
	JobID uint64
	Key   []byte

	// HeartbeatPeriod (h), SuspectTimeout (δ), CheckPeriod and StartGrace
	// as in node.Config, for the daemons' ring.
	HeartbeatPeriod, SuspectTimeout, CheckPeriod, StartGrace time.Duration
	// HangTimeout: a local process whose heartbeat word does not move, or
	// that the kernel shows stopped, for this long is hung (default δ).
	HangTimeout time.Duration
	// KeepHung leaves a hung process running after reporting it (default:
	// SIGKILL it, so that it is fail-stop like a crashed one).
	KeepHung bool

	// PinEmitter pins the heartbeat thread to CPU EmitterCPU. RealTime asks
	// for SCHED_FIFO for it, and HoldP keeps a Go P for it (as
	// node.Config.EmitterHoldsP: for a process that runs one daemon).
	PinEmitter bool
	EmitterCPU int
	RealTime   bool
	HoldP      bool

	// Socket is the path of the local Unix socket ("" for none).
	Socket string
	// Spawn, when set, is the command the daemon starts once per hosted
	// rank (with VIGIL_RANK, VIGIL_NODE and VIGIL_DAEMON_SOCK set), with
	// SpawnOut as its standard output and error (default the daemon's).
	Spawn    []string
	SpawnOut *os.File
	// SpawnRanks limits Spawn to the first SpawnRanks hosted ranks (0: all);
	// the others may attach over the socket.
	SpawnRanks int

	// Logger receives the daemon's logs (default: discarded).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.HeartbeatPeriod == 0 {
		c.HeartbeatPeriod = node.DefaultHeartbeatPeriod
	}
	if c.SuspectTimeout == 0 {
		c.SuspectTimeout = 5 * c.HeartbeatPeriod
	}
	if c.CheckPeriod == 0 {
		c.CheckPeriod = min(c.SuspectTimeout/10, c.HeartbeatPeriod)
	}
	if c.StartGrace == 0 {
		c.StartGrace = node.DefaultStartGrace + c.SuspectTimeout
	}
	if c.HangTimeout == 0 {
		c.HangTimeout = c.SuspectTimeout
	}
	if c.Listen == "" && int64(c.Node) < int64(len(c.Peers)) {
		c.Listen = c.Peers[c.Node]
	}
	if c.Listen == "" {
		c.Listen = tcp.DefaultListenAddr
	}
	if c.SpawnOut == nil {
		c.SpawnOut = os.Stderr
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first bad field, after defaults.
func (c Config) Validate() error {
	if err := c.Layout.Validate(); err != nil {
		return err
	}
	c = c.withDefaults()
	switch {
	case int64(c.Node) >= int64(c.Layout.Nodes):
		return fmt.Errorf("daemon: Config.Node = %d, want < %d nodes", c.Node, c.Layout.Nodes)
	case c.Exchange == nil && len(c.Peers) != c.Layout.Nodes:
		return fmt.Errorf("daemon: %d peer addresses for %d nodes (and no Exchange)", len(c.Peers), c.Layout.Nodes)
	case c.SuspectTimeout <= c.HeartbeatPeriod || c.HeartbeatPeriod < 0:
		return fmt.Errorf("daemon: SuspectTimeout = %v, want > HeartbeatPeriod = %v > 0", c.SuspectTimeout, c.HeartbeatPeriod)
	case c.PinEmitter && c.EmitterCPU < 0:
		return fmt.Errorf("daemon: EmitterCPU = %d, want a CPU number ≥ 0", c.EmitterCPU)
	case c.CheckPeriod <= 0 || c.HangTimeout <= 0 || c.StartGrace < 0:
		return fmt.Errorf("daemon: CheckPeriod = %v, HangTimeout = %v, StartGrace = %v: want > 0", c.CheckPeriod, c.HangTimeout, c.StartGrace)
	}
	return nil
}

// local is one process of this node.
type local struct {
	rank  ranks.Rank
	pid   int
	child *exec.Cmd   // started by the daemon
	watch *pidWatch   // not a child: its pidfd
	cc    *clientConn // attached: its connection
	slot  int         // heartbeat word, -1 if none
	bye   bool        // said goodbye: its end is a departure

	lastWord     uint64
	lastProgress int64 // mono ns
	stoppedSince int64 // mono ns, 0 if running
	gone         bool
}

// localGone tells the loop that a local process ended.
type localGone struct {
	rank  ranks.Rank
	pid   int
	cause Cause
}

// Daemon is one node's daemon.
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	tr    *tcp.Transport
	slots *hb.Slots
	em    *hb.Emitter
	table *HeartbeatTable
	ln    *net.UnixListener

	// Owned by the loop.
	ring   *hb.Ring
	prop   *Propagation
	locals map[ranks.Rank]*local
	free   []int // free heartbeat slots
	past   []Event
	// Fail-stop of daemons: the slot word of each daemon in D when it
	// joined D, and when we last told it it is evicted.
	deadSeq     map[ranks.Rank]uint64
	evictedSent map[ranks.Rank]int64
	evicted     chan struct{}

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
	msg  any
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
		cfg: cfg, log: cfg.Logger.With("node", cfg.Node), slots: hb.NewSlots(l.Nodes),
		ring: ring, prop: prop, locals: map[ranks.Rank]*local{},
		deadSeq: map[ranks.Rank]uint64{}, evictedSent: map[ranks.Rank]int64{}, evicted: make(chan struct{}),
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
	d.em, err = hb.NewEmitter(hb.EmitterConfig{Period: int64(cfg.HeartbeatPeriod), CPU: cpu, RealTime: cfg.RealTime,
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
	m, err := Decode(payload, d.cfg.Layout)
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
		d.send(out.NewObserverTo, AppendNewObserver(nil, NewObserver{d.cfg.Node}))
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
	if m, ok := in.msg.(*Evicted); ok {
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
	case *NewObserver:
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
		payload := AppendReport(nil, r)
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

// recordDead remembers the slot word of daemons that joined D, to spot
// them heartbeating later (zombies).
func (d *Daemon) recordDead(nodes []ranks.Rank) {
	for _, r := range nodes {
		d.deadSeq[r] = d.slots.Load(r)
	}
}

// checkZombies looks for heartbeats from daemons in D: a daemon declared
// dead that resumed still heartbeats its old observer. It is told to stop.
func (d *Daemon) checkZombies(now int64) {
	for r, seq := range d.deadSeq {
		if cur := d.slots.Load(r); cur > seq {
			d.deadSeq[r] = cur
			d.evict(r, now)
		}
	}
}

// evict sends EVICTED to r, at most every 100 ms.
func (d *Daemon) evict(r ranks.Rank, now int64) {
	if last, ok := d.evictedSent[r]; ok && now-last < int64(100*time.Millisecond) {
		return
	}
	d.evictedSent[r] = now
	d.log.Warn("daemon held dead is alive: evicting it", "zombie", r)
	d.send(r, AppendEvicted(nil, Evicted{r}))
}

// onEvicted handles EVICTED from a live daemon: this node was declared
// dead with all its processes. The daemon stops heartbeating, kills its
// children and signals Evicted(); the caller should Close and exit.
func (d *Daemon) onEvicted(from ranks.Rank, m *Evicted) {
	if m.Rank != d.cfg.Node || d.ring.Dead().Has(from) || d.isEvicted() {
		d.bad.Add(1)
		return
	}
	d.log.Error("this node was declared dead by the other daemons; stopping (fail-stop)", "told_by", from)
	d.em.Pause()
	d.ring.Leave()
	for _, lp := range d.locals {
		if lp.child != nil && !lp.gone {
			lp.child.Process.Kill()
		}
		if lp.cc != nil {
			lp.cc.close()
		}
	}
	close(d.evicted)
}

func (d *Daemon) isEvicted() bool {
	select {
	case <-d.evicted:
		return true
	default:
		return false
	}
}

// Evicted is closed when this daemon learns that the others declared its
// node dead (it was paused or cut off for longer than δ). Its children are
// killed then and it takes no further part: close it and exit.
func (d *Daemon) Evicted() <-chan struct{} { return d.evicted }

// localFailed reports local process lp gone (StartPropagation for a
// process) and forgets it.
func (d *Daemon) localFailed(lp *local, cause Cause) {
	if lp.gone {
		return
	}
	lp.gone = true
	d.release(lp)
	r, to, fresh := d.prop.StartProc(lp.rank, cause, *d.ring.Dead(), time.Now().UnixNano())
	d.log.Info("local process gone", "rank", lp.rank, "pid", lp.pid, "cause", cause)
	if !fresh.Empty() {
		d.broadcast(&r, to, fresh)
	}
}

// release frees lp's watch, connection and heartbeat word.
func (d *Daemon) release(lp *local) {
	if lp.watch != nil {
		lp.watch.Close()
		lp.watch = nil
	}
	if lp.cc != nil {
		lp.cc.close()
		lp.cc = nil
	}
	if lp.slot >= 0 {
		d.free = append(d.free, lp.slot)
		lp.slot = -1
	}
}

// attachLocal admits a process that connected to the local socket.
func (d *Daemon) attachLocal(a attachReq) welcome {
	l := d.cfg.Layout
	no := func(format string, args ...any) welcome {
		return welcome{Error: fmt.Sprintf(format, args...)}
	}
	nd, ok := l.NodeOf(a.rank)
	switch {
	case !ok:
		return no("rank %d is not a rank of this job (%d nodes × %d)", a.rank, l.Nodes, l.PPN)
	case nd != d.cfg.Node:
		return no("rank %d is hosted by node %d, not by this daemon (node %d)", a.rank, nd, d.cfg.Node)
	case d.prop.ProcReported(a.rank):
		return no("rank %d was already reported gone", a.rank)
	}
	lp := d.locals[a.rank]
	switch {
	case lp == nil:
		lp = &local{rank: a.rank, pid: a.cc.pid, slot: -1}
	case lp.pid != a.cc.pid:
		return no("rank %d is process %d, not %d", a.rank, lp.pid, a.cc.pid)
	case lp.cc != nil:
		return no("rank %d is already attached", a.rank)
	}
	if lp.child == nil && lp.watch == nil {
		r, pid := a.rank, a.cc.pid
		w, err := watchPid(pid, func() {
			select {
			case d.gone <- localGone{r, pid, Crashed}:
			case <-d.quit:
			}
		})
		if err != nil {
			return no("%v", err)
		}
		lp.watch = w
	}
	if len(d.free) == 0 {
		return no("no free heartbeat word (PPN = %d)", l.PPN)
	}
	lp.slot = d.free[len(d.free)-1]
	d.free = d.free[:len(d.free)-1]
	d.table.Reset(lp.slot)
	lp.cc = a.cc
	lp.bye = false // back after a goodbye: its end is a failure again
	lp.lastWord, lp.lastProgress = 0, node.Mono()
	d.locals[a.rank] = lp
	for _, ev := range d.past {
		lp.cc.send(ev)
	}
	d.log.Info("local process attached", "rank", a.rank, "pid", a.cc.pid, "slot", lp.slot)
	return welcome{OK: true, Slot: lp.slot, HeartbeatNs: int64(d.cfg.HeartbeatPeriod), Node: d.cfg.Node,
		Nodes: l.Nodes, PPN: l.PPN}
}

// detachLocal handles a closed connection: after a goodbye the process's
// end will be a departure; without one, the process only stopped talking
// to the daemon (its end, if it comes, is still watched). Either way its
// heartbeat word is no longer checked.
func (d *Daemon) detachLocal(lp *local, bye bool) {
	lp.bye = lp.bye || bye
	lp.cc = nil
	if lp.slot >= 0 {
		d.free = append(d.free, lp.slot)
		lp.slot = -1
	}
	if lp.child == nil && lp.watch == nil {
		delete(d.locals, lp.rank)
	}
}

// kill sends SIGKILL to local process lp through a handle that cannot hit
// another process reusing its pid (os.Process and the pidfd both use one).
func (d *Daemon) kill(lp *local) {
	switch {
	case lp.child != nil:
		lp.child.Process.Kill()
	case lp.watch != nil:
		lp.watch.kill()
	}
}

// checkHangs looks at every local process's heartbeat word and run state.
func (d *Daemon) checkHangs(now int64) {
	to := int64(d.cfg.HangTimeout)
	for _, lp := range d.locals {
		if lp.gone {
			continue
		}
		hung := false
		if lp.slot >= 0 {
			if w := d.table.Load(lp.slot); w != lp.lastWord {
				lp.lastWord, lp.lastProgress = w, now
			} else if now-lp.lastProgress > to {
				hung = true
			}
		}
		if procStopped(lp.pid) {
			if lp.stoppedSince == 0 {
				lp.stoppedSince = now
			} else if now-lp.stoppedSince > to {
				hung = true
			}
		} else {
			lp.stoppedSince = 0
		}
		if hung {
			d.log.Warn("local process hung", "rank", lp.rank, "pid", lp.pid)
			if !d.cfg.KeepHung {
				d.kill(lp)
			}
			d.localFailed(lp, Hung)
		}
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
