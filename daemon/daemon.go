package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/internal/limit"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// Daemon is one node's daemon: the detector of package node, run among the
// daemons (one rank per node; binomial-graph broadcast unless
// Config.Broadcast names another propagation), plus the
// monitoring of the node's local processes and their reports.
type Daemon struct {
	cfg   Config
	log   *slog.Logger
	n     *node.Node
	addr  string // the default TCP transport's address
	table *HeartbeatTable
	ln    *net.UnixListener

	// Owned by the loop.
	reported *Reported
	locals   map[ranks.Rank]*local
	free     []int // free heartbeat slots
	// nodesSeen is how many of the detector's record (n.Record, in the
	// order of n.Events) the loop has delivered: the failed nodes a
	// process attaching now is told of.
	nodesSeen int
	evicted   chan struct{}

	// Notes from the detector (OnNote runs on the node's loop and must not
	// block): queued here, signalled on noteSig.
	notesMu sync.Mutex
	notes   []detector.Note
	noteSig chan struct{}

	gone   chan localGone
	attach chan attachReq
	detach chan detachReq
	reqs   chan func()
	quit   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup

	logs    *limit.Log     // what a local connection makes us log
	pending *limit.Pending // local connections without a first line

	mu        sync.Mutex
	conns     map[*net.UnixConn]struct{} // local connections, closed by Close
	children  map[int]bool               // pids of the processes started
	refused   map[string]uint64          // local connections refused, by reason
	events    chan Event                 // Events: one channel
	closing   bool
	closeOnce sync.Once
}

// Start validates cfg, starts the daemons' detector (its transport and
// heartbeat thread), the local socket and the hosted processes
// (cfg.Spawn), and the loop.
func Start(cfg Config) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	l := cfg.Layout
	reported, err := NewReported(l)
	if err != nil {
		return nil, err
	}
	d := &Daemon{
		cfg: cfg, log: cfg.Logger.With("node", cfg.Node), reported: reported, locals: map[ranks.Rank]*local{},
		evicted: make(chan struct{}), noteSig: make(chan struct{}, 1), gone: make(chan localGone, 64),
		attach: make(chan attachReq), detach: make(chan detachReq), reqs: make(chan func()),
		quit: make(chan struct{}), done: make(chan struct{}), conns: map[*net.UnixConn]struct{}{},
		children: map[int]bool{}, refused: map[string]uint64{}, pending: limit.NewPending(maxLocalPending),
		events: make(chan Event, l.Procs()+l.Nodes+16),
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
	open := cfg.Transport
	if open == nil {
		open = d.openTCP
	}
	nc := cfg.Config
	nc.Logger, nc.OnNote = d.log, d.onNote
	d.logs = limit.NewLog(d.log, time.Second)
	d.n, err = node.Start(nc, open)
	if err != nil {
		return fail(fmt.Errorf("daemon: %w", err))
	}
	if cfg.Socket != "" {
		if d.ln, err = listenLocal(cfg.Socket); err != nil {
			return fail(err)
		}
		d.wg.Add(1)
		go d.serveLocal(d.ln)
	}
	now := node.Mono()
	var sp *spawner
	for i, r := range l.Hosted(cfg.Node) {
		if len(cfg.Spawn) == 0 || (cfg.SpawnRanks > 0 && i >= cfg.SpawnRanks) {
			break
		}
		if sp == nil {
			sp = newSpawner()
			d.wg.Add(1)
			go func() { defer d.wg.Done(); <-d.quit; sp.close() }()
		}
		cmd, err := sp.spawn(cfg.Spawn, r, cfg.Node, cfg.Socket, cfg.SpawnOut, cfg.SpawnOut)
		if err != nil {
			return fail(err)
		}
		d.locals[r] = &local{rank: r, pid: cmd.Process.Pid, child: cmd, slot: -1, lastProgress: now}
		d.mu.Lock()
		d.children[cmd.Process.Pid] = true
		d.mu.Unlock()
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
	go d.loop()
	return d, nil
}

// openTCP is the default transport: TCP among the daemons, at cfg.Peers or
// at the addresses cfg.Exchange returns.
func (d *Daemon) openTCP(slots *transport.Slots, h transport.Handler) (transport.Transport, error) {
	cfg := d.cfg
	exchange := func(_ context.Context, addr string) ([]string, error) {
		d.addr = addr
		if cfg.Exchange == nil {
			return cfg.Peers, nil
		}
		peers, err := cfg.Exchange(addr)
		if err != nil {
			return nil, fmt.Errorf("daemon: address exchange: %w", err)
		}
		if len(peers) != cfg.Layout.Nodes {
			return nil, fmt.Errorf("daemon: address exchange gave %d addresses for %d nodes", len(peers), cfg.Layout.Nodes)
		}
		return peers, nil
	}
	tr, err := tcp.Join(context.Background(), tcp.Config{Self: cfg.Node, N: cfg.Layout.Nodes, JobID: cfg.JobID,
		Key: cfg.Key, ListenAddr: cfg.Listen, Slots: slots, Handler: h, Logger: d.log}, exchange)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return tr, nil
}

// Node returns this daemon's node index.
func (d *Daemon) Node() ranks.Rank { return d.cfg.Node }

// Addr returns this daemon's address on the default TCP transport ("" with
// Config.Transport).
func (d *Daemon) Addr() string { return d.addr }

// Stats returns the counters of the daemons' detector, with the local
// connections refused counted in Transport.Rejected by reason
// (local_wrong_user, local_pending_cap, local_hello_timeout,
// local_bad_hello).
func (d *Daemon) Stats() node.Stats {
	st := d.n.Stats()
	rej := maps.Clone(st.Transport.Rejected)
	d.mu.Lock()
	for r, n := range d.refused {
		if rej == nil {
			rej = map[string]uint64{}
		}
		rej[r] += n
	}
	d.mu.Unlock()
	st.Transport.Rejected = rej
	return st
}

// onNote is the detector's Config.OnNote: a report published by another
// daemon, handed to the loop.
func (d *Daemon) onNote(n detector.Note) {
	d.notesMu.Lock()
	d.notes = append(d.notes, n)
	d.notesMu.Unlock()
	select {
	case d.noteSig <- struct{}{}:
	default:
	}
}

func (d *Daemon) loop() {
	defer close(d.done)
	// Hang checks only: the detector runs on its own loop and thread.
	tick := time.NewTicker(max(d.cfg.CheckPeriod, d.cfg.HangTimeout/8))
	defer tick.Stop()
	nodes, evicted := d.n.Events(), d.n.Evicted()
	for {
		select {
		case <-d.quit:
			return
		case <-tick.C:
			if !d.isEvicted() {
				d.checkHangs(node.Mono())
			}
		case ev, ok := <-nodes:
			if !ok {
				nodes = nil
				continue
			}
			// A node's failure is its daemon's: it and every process it hosted.
			d.nodesSeen++
			d.deliver(d.reported.Node(ev.Rank, ev.Detector, ev.DetectedAt.UnixNano()))
			d.log.Info("node failed", "dead", ev.Rank, "detector", ev.Detector)
		case <-d.noteSig:
			d.notesMu.Lock()
			notes := d.notes
			d.notes = nil
			d.notesMu.Unlock()
			for _, n := range notes {
				d.received(n)
			}
		case <-evicted:
			evicted = nil
			d.stopEvicted()
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

// received handles another daemon's report of process failures.
func (d *Daemon) received(n detector.Note) {
	if d.isEvicted() {
		return
	}
	r, err := wire.DecodeReport(n.Payload, d.cfg.Layout.Procs())
	if err != nil {
		d.log.Warn("dropping malformed report", "from", n.Source, "err", err)
		return
	}
	d.deliver(d.reported.Procs(r.Procs, n.Source, n.At))
}

// publish is StartPropagation for failures of local processes: the report
// to every other daemon, and the failures to this node's processes.
func (d *Daemon) publish(procs []ProcFailure) {
	var fresh []ProcFailure
	for _, q := range procs {
		if !d.reported.ProcReported(q.Rank) && !slices.ContainsFunc(fresh, func(f ProcFailure) bool { return f.Rank == q.Rank }) {
			fresh = append(fresh, q)
		}
	}
	if len(fresh) == 0 {
		return
	}
	evs := d.reported.Procs(fresh, d.cfg.Node, time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := d.n.Publish(ctx, wire.AppendReport(nil, &Report{Procs: fresh})); err != nil {
		d.log.Warn("publishing a report failed", "err", err)
	}
	d.deliver(evs)
}

// deliver is the outer star of the two-level broadcast: the events to
// every local process and to the daemon's own subscribers.
func (d *Daemon) deliver(evs []Event) {
	if len(evs) == 0 {
		return
	}
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
	for _, ev := range evs {
		select {
		case d.events <- ev:
		default: // Events' buffer is full: nobody reads it
		}
	}
}

// stopEvicted obeys the detector's eviction: the other daemons declared
// this node dead with all its processes (it was paused or cut off past δ).
// The heartbeat thread is already stopped; the children are killed and
// Evicted() is closed, so that a node reported down stays down.
func (d *Daemon) stopEvicted() {
	if d.n.Minority() {
		d.log.Error("this node holds most of the other nodes dead: minority partition; stopping (fail-stop)")
	} else {
		d.log.Error("this node was declared dead by the other daemons; stopping (fail-stop)")
	}
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

// Minority reports whether the stop was this daemon's own: it held most
// of the nodes dead, on the minority side of a partition (node.Node.Minority,
// docs/partitions.md). Valid once Evicted is closed.
func (d *Daemon) Minority() bool { return d.n.Minority() }

// Events returns the daemon's event channel: every failure this daemon
// learns since Start, each once. Every call returns the same channel (as
// context.Context's Done), so it may be called in a select loop. Its
// buffer holds one event per node and per rank; events that find it full
// (nobody reads) are dropped. It is closed by Close.
func (d *Daemon) Events() <-chan Event { return d.events }

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

// Close stops the loop, the detector and the local socket. Spawned
// processes are killed (they die with their node).
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
	if d.n != nil {
		err = d.n.Close()
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
	close(d.events) // the loop has ended: nothing delivers any more
	return err
}
