package wire

import (
	"encoding/binary"
	"fmt"

	"github.com/vigil-hpc/vigil/ranks"
)

// A daemon's report of its local processes' failures (package daemon, seed
// 003's node-level mode) is the payload of a note (bcast.Note), which the
// daemons' detector broadcasts like a failure. Its layout is a type byte
// then fixed-size little-endian fields:
//
//	REPORT: 'R' u32 |Procs|, |Procs|×(u32 rank, u8 cause)
//
// A node's failure needs no report: every daemon expands a dead node to
// the ranks it hosted from the job's layout.

// TypeReport is the first byte of a report.
const TypeReport byte = 'R'

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

// Report is seed 003's propagation message for process failures: the
// processes its source daemon saw fail. Who sent it and when travel in the
// note that carries it.
type Report struct {
	Procs []ProcFailure
}

// AppendReport appends r's encoding (see the layout above) to dst. A
// report is encoded as given, valid or not; every receiver checks it
// (Validate).
func AppendReport(dst []byte, r *Report) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(append(dst, TypeReport), uint32(len(r.Procs)))
	for _, p := range r.Procs {
		dst = append(le.AppendUint32(dst, p.Rank), byte(p.Cause))
	}
	return dst
}

// Validate checks r for a job of procs application processes: at least one
// failure, each a rank below procs with a valid Cause. The error is an
// *Error naming the first bad field, such as "daemon.report.procs[2].rank".
func (r *Report) Validate(procs int) error {
	if len(r.Procs) == 0 {
		return errf(ReasonBadPayload, "daemon.report.procs", "empty: a report announces at least one failure")
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

// DecodeReport decodes the report occupying all of b, for a job of procs
// application processes; it must pass Validate. Errors are *Error values
// naming the field; the result does not alias b.
func DecodeReport(b []byte, procs int) (*Report, error) {
	if len(b) == 0 {
		return nil, errf(ReasonTruncated, "daemon.type", "empty report")
	}
	if b[0] != TypeReport {
		return nil, errf(ReasonBadType, "daemon.type", "unknown message type %q", b[0])
	}
	d := &decoder{b: b[1:]}
	m := &Report{}
	if n := d.count32("daemon.report.procs.count", 5); n > 0 {
		m.Procs = make([]ProcFailure, n)
		for i := range m.Procs {
			m.Procs[i].Rank = d.uint32le(fmt.Sprintf("daemon.report.procs[%d].rank", i))
			m.Procs[i].Cause = Cause(d.byte1(fmt.Sprintf("daemon.report.procs[%d].cause", i)))
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(ReasonBadPayload, "daemon", "%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	if err := m.Validate(procs); err != nil {
		return nil, err
	}
	return m, nil
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
