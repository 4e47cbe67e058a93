package daemon

import (
	"errors"
	"fmt"
	"slices"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
)

// Cause says why a process is reported gone.
type Cause uint8

const (
	// Crashed: the process ended unexpectedly: killed by a signal (a child
	// of the daemon), or ended while attached (the pidfd does not tell how).
	Crashed Cause = 1
	// Hung: the process is alive but stopped making progress (its heartbeat
	// word did not move, or the kernel shows it stopped) for the hang
	// time-out. Its daemon kills it, so a hung process is fail-stop too.
	Hung Cause = 2
	// NodeDown: the process's node (its daemon) failed.
	NodeDown Cause = 3
	// Left: the process ended cleanly (exit status 0 or a goodbye).
	Left Cause = 4
	// Exited: a child of the daemon exited with a non-zero status.
	Exited Cause = 5
)

func (c Cause) String() string {
	switch c {
	case Crashed:
		return "crashed"
	case Hung:
		return "hung"
	case NodeDown:
		return "node_down"
	case Left:
		return "left"
	case Exited:
		return "exited"
	}
	return fmt.Sprintf("cause(%d)", uint8(c))
}

func (c Cause) valid() bool { return c >= Crashed && c <= Exited }

// ProcFailure is one process in a report.
type ProcFailure struct {
	Rank  ranks.Rank
	Cause Cause
}

// Report is seed 003's propagation message msg: the failed daemons and
// processes, as the daemon that started the propagation saw them.
type Report struct {
	// Source is the daemon that started the propagation, and D the daemons
	// it knew dead then: the binomial graph is built over the others.
	Source ranks.Rank
	D      ranks.Set
	// Nodes are failed daemons; Procs failed processes (for a failed
	// daemon, every process it hosted, with cause NodeDown).
	Nodes []ranks.Rank
	Procs []ProcFailure
	// Detector is the daemon that observed the failure and DetectedAt its
	// wall clock then (Unix ns); reporting only.
	Detector   ranks.Rank
	DetectedAt int64
}

// ErrInvalidReport is wrapped by every error of Report.Validate.
var ErrInvalidReport = errors.New("daemon: invalid report")

// Validate checks r against layout l and names the first bad field.
func (r *Report) Validate(l Layout) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidReport, field, fmt.Sprintf(format, args...))
	}
	n := int64(l.Nodes)
	switch {
	case int64(r.Source) >= n:
		return bad("Source", "daemon %d, want < %d", r.Source, n)
	case int64(r.Detector) >= n:
		return bad("Detector", "daemon %d, want < %d", r.Detector, n)
	case len(r.Nodes) == 0 && len(r.Procs) == 0:
		return bad("Nodes/Procs", "both empty: a report announces at least one failure")
	case r.D.Has(r.Source):
		return bad("D", "holds the source %d", r.Source)
	}
	if ds := r.D.Members(); len(ds) > 0 && int64(ds[len(ds)-1]) >= n {
		return bad("D", "daemon %d, want < %d", ds[len(ds)-1], n)
	}
	for i, d := range r.Nodes {
		if int64(d) >= n {
			return bad(fmt.Sprintf("Nodes[%d]", i), "daemon %d, want < %d", d, n)
		}
	}
	for i, p := range r.Procs {
		if int64(p.Rank) >= int64(l.Procs()) {
			return bad(fmt.Sprintf("Procs[%d]", i), "rank %d, want < %d", p.Rank, l.Procs())
		}
		if !p.Cause.valid() {
			return bad(fmt.Sprintf("Procs[%d]", i), "unknown cause %d", p.Cause)
		}
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
		r.Procs = append(r.Procs, ProcFailure{q, NodeDown})
	}
	return p.start(r)
}

// StartProc is StartPropagation(E_id) for local process q (the daemon saw
// it crash, hang or leave).
func (p *Propagation) StartProc(q ranks.Rank, c Cause, D ranks.Set, at int64) (Report, []ranks.Rank, Fresh) {
	if _, ok := p.procs[q]; ok {
		return Report{}, nil, Fresh{}
	}
	return p.start(Report{Source: p.self, D: D.Clone(), Procs: []ProcFailure{{q, c}}, Detector: p.self, DetectedAt: at})
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
// (or an equivalent one) before, so every BMG edge carries it once.
func (p *Propagation) Forward(r Report, localDead *ranks.Set) ([]ranks.Rank, Fresh, error) {
	if err := r.Validate(p.layout); err != nil {
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
