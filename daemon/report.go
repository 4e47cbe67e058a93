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

// Reported is Reported_i of seed 003's Two-Level Reliable Broadcast
// (Algorithm 1): the failed daemons and processes this daemon knows. The
// inner level of the broadcast is the daemons' detector (a node's failure
// is its daemon's, found by the observation ring and broadcast over the
// binomial graph, or Config.Broadcast's propagation; a report of process
// failures travels as a note the same way); the outer level, the star to
// local processes, is the caller's: it sends the events Node and Procs
// return to every attached local process.
//
// The failed daemons are the detector's own record (node.Node.Record),
// which names each once: Reported keeps only the processes, the one
// record of them, with the event each was delivered with. It is pure and
// not safe for concurrent use.
type Reported struct {
	layout Layout
	procs  map[ranks.Rank]struct{}
	past   []Event // the processes' events, in delivery order
}

// NewReported returns Reported_i = ∅ for a job of layout l.
func NewReported(l Layout) (*Reported, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &Reported{layout: l, procs: map[ranks.Rank]struct{}{}}, nil
}

// Node adds the failure of daemon d, found by detector at its wall clock
// at (Unix ns), with every process it hosted (cause NodeDown), and returns
// the events to deliver: d's (KindNode) and those of its processes not
// reported before. The detector's record names each daemon once: call it
// once per daemon.
func (p *Reported) Node(d, detector ranks.Rank, at int64) []Event {
	if int64(d) >= int64(p.layout.Nodes) {
		return nil
	}
	out := []Event{nodeEvent(d, detector, at)}
	for _, q := range p.layout.Hosted(d) {
		out = p.addProc(out, ProcFailure{Rank: q, Cause: NodeDown}, detector, at)
	}
	return out
}

// Procs adds the failed processes of a report (checked with
// Report.Validate by its decoder), found by detector at its wall clock at,
// and returns the events of those not reported before.
func (p *Reported) Procs(ps []ProcFailure, detector ranks.Rank, at int64) []Event {
	var out []Event
	for _, q := range ps {
		out = p.addProc(out, q, detector, at)
	}
	return out
}

// ProcReported reports whether rank r is in Reported_i.
func (p *Reported) ProcReported(r ranks.Rank) bool { _, ok := p.procs[r]; return ok }

// Past returns the events of every process reported, in delivery order.
// The caller must not modify it.
func (p *Reported) Past() []Event { return p.past }

// addProc records q unless it is reported, and appends its event to out.
func (p *Reported) addProc(out []Event, q ProcFailure, detector ranks.Rank, at int64) []Event {
	if _, ok := p.procs[q.Rank]; ok {
		return out
	}
	p.procs[q.Rank] = struct{}{}
	nd, _ := p.layout.NodeOf(q.Rank)
	ev := Event{Kind: KindProc, Rank: q.Rank, Node: nd, Cause: q.Cause.String(), Detector: detector, DetectedUnix: at}
	p.past = append(p.past, ev)
	return append(out, ev)
}
