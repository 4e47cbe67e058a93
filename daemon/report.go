package daemon

import (
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// A daemon's report and its encoding are internal/wire's (Report,
// AppendReport, DecodeReport); Report and what it is made of keep their
// names here.

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

// Report is seed 003's propagation message for process failures: the
// processes a daemon saw fail, published to the other daemons as a note
// (node.Node.Publish).
type Report = wire.Report

// Fresh is what a daemon learned: failures it did not know, to be delivered
// locally (printed, and sent to its local processes).
type Fresh struct {
	Nodes []ranks.Rank
	Procs []ProcFailure
}

// Empty reports whether nothing was new.
func (f Fresh) Empty() bool { return len(f.Nodes) == 0 && len(f.Procs) == 0 }

// Reported is Reported_i of seed 003's Two-Level Reliable Broadcast
// (Algorithm 1): the failed daemons and processes this daemon knows. The
// inner level of the broadcast is the daemons' detector (a node's failure
// is its daemon's, found by the observation ring and broadcast over the
// binomial graph, or Config.Broadcast's propagation; a report of process
// failures travels as a note the same way); the outer level, the star to local processes, is the
// caller's: it sends Fresh to every attached local process. It is pure and
// not safe for concurrent use.
type Reported struct {
	layout Layout
	nodes  ranks.Set
	procs  map[ranks.Rank]struct{}
}

// NewReported returns Reported_i = ∅ for a job of layout l.
func NewReported(l Layout) (*Reported, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &Reported{layout: l, procs: map[ranks.Rank]struct{}{}}, nil
}

// Node adds daemon d and every process it hosted (cause NodeDown) and
// returns what was new.
func (p *Reported) Node(d ranks.Rank) Fresh {
	var f Fresh
	if int64(d) >= int64(p.layout.Nodes) || !p.nodes.Add(d) {
		return f
	}
	f.Nodes = []ranks.Rank{d}
	for _, q := range p.layout.Hosted(d) {
		if p.addProc(q) {
			f.Procs = append(f.Procs, ProcFailure{Rank: q, Cause: NodeDown})
		}
	}
	return f
}

// Procs adds the failed processes of a report (checked with
// Report.Validate by its decoder) and returns what was new.
func (p *Reported) Procs(ps []ProcFailure) Fresh {
	var f Fresh
	for _, q := range ps {
		if p.addProc(q.Rank) {
			f.Procs = append(f.Procs, q)
		}
	}
	return f
}

// NodeReported reports whether daemon d is in Reported_i.
func (p *Reported) NodeReported(d ranks.Rank) bool { return p.nodes.Has(d) }

// ProcReported reports whether rank r is in Reported_i.
func (p *Reported) ProcReported(r ranks.Rank) bool { _, ok := p.procs[r]; return ok }

func (p *Reported) addProc(r ranks.Rank) bool {
	if _, ok := p.procs[r]; ok {
		return false
	}
	p.procs[r] = struct{}{}
	return true
}
