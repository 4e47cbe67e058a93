package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/vigil-hpc/vigil/ranks"
)

// The daemons' messages (package daemon, seed 003's node-level mode)
// travel as payloads of the authenticated transport (transport/tcp frames
// carry the job ID, the sender's rank and an HMAC). They have their own
// layout, a type byte then fixed-size little-endian fields:
//
//	NEWOBSERVER: 'O' u32 observer
//	EVICTED:     'E' u32 rank
//	REPORT:      'R' u32 source, u32 detector, i64 detectedAt,
//	             u32 |D|, |D|×u32 (strictly increasing),
//	             u32 |Nodes|, |Nodes|×u32, u32 |Procs|, |Procs|×(u32 rank, u8 cause)

// DaemonType is the first byte of a daemon message.
type DaemonType uint8

// Daemon message types.
const (
	TypeDaemonNewObserver DaemonType = 'O'
	TypeDaemonEvicted     DaemonType = 'E'
	TypeReport            DaemonType = 'R'
)

// DaemonMessage is a message between daemons: *DaemonNewObserver,
// *DaemonEvicted or *Report.
type DaemonMessage interface {
	// Type returns the message's type byte.
	Type() DaemonType
	// AppendTo appends the message's encoding, type byte first.
	AppendTo(dst []byte) []byte
}

// DaemonNewObserver is seed 000's NEWOBSERVER(j) between daemons: daemon
// Observer observes the receiver from now on.
type DaemonNewObserver struct{ Observer ranks.Rank }

// DaemonEvicted tells daemon Rank that the others declared it dead (it was
// paused or cut off for longer than δ, and its node reported down with its
// processes): it must stop, as a crashed node would have (fail-stop).
type DaemonEvicted struct{ Rank ranks.Rank }

// Cause says why a process is reported gone.
type Cause uint8

// Causes of a process failure.
const (
	// CauseCrashed: the process ended unexpectedly: killed by a signal (a
	// child of the daemon), or ended while attached (the pidfd does not
	// tell how).
	CauseCrashed Cause = 1
	// CauseHung: the process is alive but stopped making progress (its
	// heartbeat word did not move, or the kernel shows it stopped) for the
	// hang time-out. Its daemon kills it, so a hung process is fail-stop
	// too.
	CauseHung Cause = 2
	// CauseNodeDown: the process's node (its daemon) failed.
	CauseNodeDown Cause = 3
	// CauseLeft: the process ended cleanly (exit status 0 or a goodbye).
	CauseLeft Cause = 4
	// CauseExited: a child of the daemon exited with a non-zero status.
	CauseExited Cause = 5
)

// String returns the cause's name, as daemons report it to local processes.
func (c Cause) String() string {
	switch c {
	case CauseCrashed:
		return "crashed"
	case CauseHung:
		return "hung"
	case CauseNodeDown:
		return "node_down"
	case CauseLeft:
		return "left"
	case CauseExited:
		return "exited"
	}
	return fmt.Sprintf("cause(%d)", uint8(c))
}

// Valid reports whether c is one of the Cause constants.
func (c Cause) Valid() bool { return c >= CauseCrashed && c <= CauseExited }

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
	// daemon, every process it hosted, with cause CauseNodeDown).
	Nodes []ranks.Rank
	Procs []ProcFailure
	// Detector is the daemon that observed the failure and DetectedAt its
	// wall clock then (Unix ns); reporting only.
	Detector   ranks.Rank
	DetectedAt int64
}

// Type implements DaemonMessage.
func (*DaemonNewObserver) Type() DaemonType { return TypeDaemonNewObserver }

// Type implements DaemonMessage.
func (*DaemonEvicted) Type() DaemonType { return TypeDaemonEvicted }

// Type implements DaemonMessage.
func (*Report) Type() DaemonType { return TypeReport }

// AppendTo encodes: 'O', observer (u32).
func (m *DaemonNewObserver) AppendTo(dst []byte) []byte {
	return binary.LittleEndian.AppendUint32(append(dst, byte(TypeDaemonNewObserver)), m.Observer)
}

// AppendTo encodes: 'E', rank (u32).
func (m *DaemonEvicted) AppendTo(dst []byte) []byte {
	return binary.LittleEndian.AppendUint32(append(dst, byte(TypeDaemonEvicted)), m.Rank)
}

// AppendTo encodes the report (see the layout above). A report is encoded
// as given, valid or not; every receiver checks it (Validate).
func (r *Report) AppendTo(b []byte) []byte {
	le := binary.LittleEndian
	b = append(b, byte(TypeReport))
	b = le.AppendUint32(b, r.Source)
	b = le.AppendUint32(b, r.Detector)
	b = le.AppendUint64(b, uint64(r.DetectedAt))
	ds := r.D.Members()
	b = le.AppendUint32(b, uint32(len(ds)))
	for _, d := range ds {
		b = le.AppendUint32(b, d)
	}
	b = le.AppendUint32(b, uint32(len(r.Nodes)))
	for _, d := range r.Nodes {
		b = le.AppendUint32(b, d)
	}
	b = le.AppendUint32(b, uint32(len(r.Procs)))
	for _, p := range r.Procs {
		b = append(le.AppendUint32(b, p.Rank), byte(p.Cause))
	}
	return b
}

// AppendDaemon appends m's encoding to dst.
func AppendDaemon(dst []byte, m DaemonMessage) []byte { return m.AppendTo(dst) }

// Validate checks r for a job of nodes daemons and procs application
// processes: Source, Detector, D and Nodes are daemons below nodes, D does
// not hold Source, Procs are ranks below procs with a valid Cause, and the
// report announces at least one failure. The error is an *Error naming
// the first bad field, such as "daemon.report.procs[2].rank".
func (r *Report) Validate(nodes, procs int) error {
	n := int64(nodes)
	switch {
	case int64(r.Source) >= n:
		return errf(ReasonUnknownRank, "daemon.report.source", "daemon %d not below %d", r.Source, n)
	case int64(r.Detector) >= n:
		return errf(ReasonUnknownRank, "daemon.report.detector", "daemon %d not below %d", r.Detector, n)
	case len(r.Nodes) == 0 && len(r.Procs) == 0:
		return errf(ReasonBadPayload, "daemon.report", "nodes and procs both empty: a report announces at least one failure")
	case r.D.Has(r.Source):
		return errf(ReasonBadPayload, "daemon.report.d", "holds the source %d", r.Source)
	}
	if ds := r.D.Members(); len(ds) > 0 && int64(ds[len(ds)-1]) >= n {
		return errf(ReasonUnknownRank, fmt.Sprintf("daemon.report.d[%d]", len(ds)-1), "daemon %d not below %d", ds[len(ds)-1], n)
	}
	for i, d := range r.Nodes {
		if int64(d) >= n {
			return errf(ReasonUnknownRank, fmt.Sprintf("daemon.report.nodes[%d]", i), "daemon %d not below %d", d, n)
		}
	}
	for i, p := range r.Procs {
		if int64(p.Rank) >= int64(procs) {
			return errf(ReasonUnknownRank, fmt.Sprintf("daemon.report.procs[%d].rank", i), "rank %d not below %d", p.Rank, procs)
		}
		if !p.Cause.Valid() {
			return errf(ReasonBadType, fmt.Sprintf("daemon.report.procs[%d].cause", i), "unknown cause %d", p.Cause)
		}
	}
	return nil
}

// DecodeDaemon decodes the daemon message occupying all of b, for a job of
// nodes daemons (nodes ≥ 1) and procs application processes: every daemon
// it names must be below nodes, and a report must pass Validate. Errors
// are *Error values naming the field; the result does not alias b.
func DecodeDaemon(b []byte, nodes, procs int) (DaemonMessage, error) {
	if len(b) == 0 {
		return nil, errf(ReasonTruncated, "daemon.type", "empty message")
	}
	d := &decoder{b: b[1:]}
	var m DaemonMessage
	switch DaemonType(b[0]) {
	case TypeDaemonNewObserver:
		m = &DaemonNewObserver{Observer: d.daemonRank("daemon.newobserver.observer", nodes)}
	case TypeDaemonEvicted:
		m = &DaemonEvicted{Rank: d.daemonRank("daemon.evicted.rank", nodes)}
	case TypeReport:
		m = d.report()
	default:
		return nil, errf(ReasonBadType, "daemon.type", "unknown message type %q", b[0])
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(ReasonBadPayload, "daemon", "%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	if r, ok := m.(*Report); ok {
		if err := r.Validate(nodes, procs); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// report decodes the fields of a Report (everything after the type); the
// caller validates it.
func (d *decoder) report() *Report {
	m := &Report{
		Source:     d.uint32le("daemon.report.source"),
		Detector:   d.uint32le("daemon.report.detector"),
		DetectedAt: int64(d.uint64le("daemon.report.detected_at")),
	}
	n := d.count32("daemon.report.d.count", 4)
	ds := make([]ranks.Rank, n)
	for i := range ds {
		ds[i] = d.uint32le(fmt.Sprintf("daemon.report.d[%d]", i))
		if d.err == nil && i > 0 && ds[i] <= ds[i-1] {
			d.fail(ReasonBadPayload, fmt.Sprintf("daemon.report.d[%d]", i), "not strictly increasing: %d after %d", ds[i], ds[i-1])
		}
	}
	if d.err == nil {
		set, err := ranks.FromSorted(ds)
		if err != nil { // unreachable: checked above
			d.fail(ReasonBadPayload, "daemon.report.d", "%v", err)
		}
		m.D = set
	}
	if n = d.count32("daemon.report.nodes.count", 4); n > 0 {
		m.Nodes = make([]ranks.Rank, n)
		for i := range m.Nodes {
			m.Nodes[i] = d.uint32le(fmt.Sprintf("daemon.report.nodes[%d]", i))
		}
	}
	if n = d.count32("daemon.report.procs.count", 5); n > 0 {
		m.Procs = make([]ProcFailure, n)
		for i := range m.Procs {
			m.Procs[i].Rank = d.uint32le(fmt.Sprintf("daemon.report.procs[%d].rank", i))
			m.Procs[i].Cause = Cause(d.byte1(fmt.Sprintf("daemon.report.procs[%d].cause", i)))
		}
	}
	if d.err != nil {
		return nil
	}
	return m
}

// daemonRank reads a daemon index (u32) that must be below nodes.
func (d *decoder) daemonRank(field string, nodes int) ranks.Rank {
	v := d.uint32le(field)
	if d.err == nil && int64(v) >= int64(nodes) {
		d.fail(ReasonUnknownRank, field, "daemon %d not below %d", v, nodes)
	}
	return v
}

func (d *decoder) uint32le(field string) uint32 {
	if b := d.fixed(field, 4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

// count32 reads a u32 list length whose entries take elem bytes each; a
// count whose entries cannot fit in the remaining bytes is rejected before
// anything is allocated.
func (d *decoder) count32(field string, elem int) int {
	v := d.uint32le(field)
	if d.err != nil {
		return 0
	}
	if uint64(v)*uint64(elem) > uint64(len(d.b)) {
		d.fail(ReasonBadPayload, field, "%d entries announced, %d bytes left", v, len(d.b))
		return 0
	}
	return int(v)
}
