package daemon

import (
	"errors"
	"fmt"
	"slices"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// The daemons' messages and their encoding are internal/wire's
// (DaemonNewObserver, DaemonEvicted, Report; DecodeDaemon). Report and
// what it is made of keep their names here.

// Cause says why a process is reported gone (see the constants below).
type Cause = wire.Cause

// Causes of a process failure.
const (
	// Crashed: the process ended unexpectedly: killed by a signal (a child
	// of the daemon), or ended while attached (the pidfd does not tell how).
	Crashed = wire.CauseCrashed
	// Hung: the process is alive but stopped making progress (its heartbeat
	// word did not move, or the kernel shows it stopped) for the hang
	// time-out. Its daemon kills it, so a hung process is fail-stop too.
	Hung = wire.CauseHung
	// NodeDown: the process's node (its daemon) failed.
	NodeDown = wire.CauseNodeDown
	// Left: the process ended cleanly (exit status 0 or a goodbye).
	Left = wire.CauseLeft
	// Exited: a child of the daemon exited with a non-zero status.
	Exited = wire.CauseExited
)

// ProcFailure is one process in a report.
type ProcFailure = wire.ProcFailure

// Report is seed 003's propagation message msg: the failed daemons and
// processes, as the daemon that started the propagation saw them.
type Report = wire.Report

// ErrInvalidReport is wrapped by the error of Propagation.Forward for a
// report that fails Report.Validate against the layout.
var ErrInvalidReport = errors.New("daemon: invalid report")

// validateReport checks r against layout l; the error wraps
// ErrInvalidReport and names the first bad field.
func validateReport(r *Report, l Layout) error {
	if err := r.Validate(l.Nodes, l.Procs()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidReport, err)
	}
	return nil
}

// Fresh is what a report taught a daemon: failures it did not know, to be
// delivered locally (printed, and sent to its local processes).
type Fresh struct {
	Nodes []ranks.Rank
	Procs []ProcFailure
}

// Empty reports whether nothing was new.
func (f Fresh) Empty() bool { return len(f.Nodes) == 0 && len(f.Procs) == 0 }

// Propagation is one daemon's state of seed 003's Two-Level Reliable
// Broadcast (Algorithm 1): Reported_i, the failures it knows, and the
// procedures StartPropagation and Forwarding. The inner level is the
// binomial graph between daemons (bcast.BMG, over the daemons alive in the
// source's view); the outer level (the star to local processes) is the
// caller's: it sends Fresh to every attached local process. It is pure and
// not safe for concurrent use.
type Propagation struct {
	self     ranks.Rank
	layout   Layout
	nodes    ranks.Set               // Reported_i ∩ daemons
	procs    map[ranks.Rank]struct{} // Reported_i ∩ processes
	overlay  bcast.BMG
	started  uint64
	forwards uint64
}

// NewPropagation returns daemon self's state, Reported_self = ∅.
func NewPropagation(self ranks.Rank, l Layout) (*Propagation, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if int64(self) >= int64(l.Nodes) {
		return nil, fmt.Errorf("daemon: self = %d, want < Nodes = %d", self, l.Nodes)
	}
	return &Propagation{self: self, layout: l, procs: map[ranks.Rank]struct{}{}}, nil
}

// NodeReported and ProcReported report whether a failure is in Reported_i.
func (p *Propagation) NodeReported(d ranks.Rank) bool { return p.nodes.Has(d) }

// ProcReported reports whether rank r is in Reported_i.
func (p *Propagation) ProcReported(r ranks.Rank) bool { _, ok := p.procs[r]; return ok }

// StartNode is StartPropagation(E_id) for a daemon d found dead by this
// daemon's observer: msg = {d} ∪ Hosted{d}. D is this daemon's dead set
// (including d). It returns the report, the daemons to send it to, and
// what is new here; nothing if d was already reported.
func (p *Propagation) StartNode(d ranks.Rank, D ranks.Set, at int64) (Report, []ranks.Rank, Fresh) {
	if p.nodes.Has(d) || d == p.self {
		return Report{}, nil, Fresh{}
	}
	r := Report{Source: p.self, D: D.Clone(), Nodes: []ranks.Rank{d}, Detector: p.self, DetectedAt: at}
	for _, q := range p.layout.Hosted(d) {
		r.Procs = append(r.Procs, ProcFailure{Rank: q, Cause: NodeDown})
	}
	return p.start(r)
}

// StartProc is StartPropagation(E_id) for local process q (the daemon saw
// it crash, hang or leave).
func (p *Propagation) StartProc(q ranks.Rank, c Cause, D ranks.Set, at int64) (Report, []ranks.Rank, Fresh) {
	if _, ok := p.procs[q]; ok {
		return Report{}, nil, Fresh{}
	}
	return p.start(Report{Source: p.self, D: D.Clone(), Procs: []ProcFailure{{Rank: q, Cause: c}}, Detector: p.self, DetectedAt: at})
}

func (p *Propagation) start(r Report) (Report, []ranks.Rank, Fresh) {
	p.started++
	fresh := p.add(&r)
	return r, p.neighbours(r.Source, &r.D, nil), fresh
}

// Forward is Forwarding(msg) at daemon self: if msg ⊄ Reported_self, it
// returns the daemons to forward to (ReliableBroadcast, minus those in
// localDead, which may be nil) and adds msg to Reported_self. A report
// already contained in Reported_self is dropped: the daemon forwarded it
// (or an equivalent one) before, so every BMG edge carries it once. A
// report that fails Report.Validate against the layout is an error
// wrapping ErrInvalidReport that names the field.
func (p *Propagation) Forward(r Report, localDead *ranks.Set) ([]ranks.Rank, Fresh, error) {
	if err := validateReport(&r, p.layout); err != nil {
		return nil, Fresh{}, err
	}
	fresh := p.add(&r)
	if fresh.Empty() {
		return nil, Fresh{}, nil
	}
	to := p.neighbours(r.Source, &r.D, localDead)
	p.forwards += uint64(len(to))
	return to, fresh, nil
}

// add puts msg into Reported_i and returns what was new.
func (p *Propagation) add(r *Report) Fresh {
	var f Fresh
	for _, d := range r.Nodes {
		if p.nodes.Add(d) {
			f.Nodes = append(f.Nodes, d)
		}
	}
	for _, q := range r.Procs {
		if _, ok := p.procs[q.Rank]; !ok {
			p.procs[q.Rank] = struct{}{}
			f.Procs = append(f.Procs, q)
		}
	}
	return f
}

// neighbours is ReliableBroadcast's daemon part: the BMG neighbours of self
// for a broadcast from source over the daemons not in D, spanning-tree
// children first, without those in localDead.
func (p *Propagation) neighbours(source ranks.Rank, D, localDead *ranks.Set) []ranks.Rank {
	to := p.overlay.Neighbors(p.self, source, p.layout.Nodes, D)
	if localDead != nil {
		to = slices.DeleteFunc(to, func(r ranks.Rank) bool { return localDead.Has(r) })
	}
	return to
}

// Counters returns how many propagations this daemon started and how many
// messages it forwarded for others.
func (p *Propagation) Counters() (started, forwarded uint64) { return p.started, p.forwards }
