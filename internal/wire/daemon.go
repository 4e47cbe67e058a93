package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vigil-hpc/vigil/ranks"
)

// The daemons' messages travel as payloads of the authenticated transport
// (transport/tcp frames carry the job ID, the sender's rank and an HMAC).
// Layout, little-endian:
//
//	NEWOBSERVER: 'O' u32 observer
//	EVICTED:     'E' u32 rank
//	REPORT:      'R' u32 source, u32 detector, i64 detectedAt,
//	             u32 |D|, |D|×u32 (strictly increasing),
//	             u32 |Nodes|, |Nodes|×u32, u32 |Procs|, |Procs|×(u32 rank, u8 cause)
const (
	tagNewObserver = 'O'
	tagReport      = 'R'
	tagEvicted     = 'E'
)

// Evicted tells daemon Rank that the others declared it dead (it was
// paused or cut off for longer than δ, and its node reported down with its
// processes): it must stop, as a crashed node would have (fail-stop).
type Evicted struct{ Rank ranks.Rank }

// AppendEvicted appends the encoding of m to b.
func AppendEvicted(b []byte, m Evicted) []byte {
	return binary.LittleEndian.AppendUint32(append(b, tagEvicted), m.Rank)
}

// NewObserver is seed 000's NEWOBSERVER(j): daemon Observer observes the
// receiver from now on.
type NewObserver struct{ Observer ranks.Rank }

// ErrBadMessage is wrapped by every decoding error.
var ErrBadMessage = errors.New("daemon: bad message")

// AppendNewObserver appends the encoding of m to b.
func AppendNewObserver(b []byte, m NewObserver) []byte {
	return binary.LittleEndian.AppendUint32(append(b, tagNewObserver), m.Observer)
}

// AppendReport appends the encoding of r to b.
func AppendReport(b []byte, r *Report) []byte {
	le := binary.LittleEndian
	b = append(b, tagReport)
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

// reader decodes little-endian fields and remembers the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrBadMessage, fmt.Sprintf(format, args...))
	}
}

func (r *reader) u32(field string) uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.fail("%s: truncated", field)
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64(field string) uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.fail("%s: truncated", field)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// count reads a list length and checks that elem-byte entries fit.
func (r *reader) count(field string, elem int) int {
	n := r.u32(field + " count")
	if r.err == nil && uint64(n)*uint64(elem) > uint64(len(r.b)) {
		r.fail("%s: %d entries announced, %d bytes left", field, n, len(r.b))
		return 0
	}
	return int(n)
}

// Decode decodes one daemon message (*NewObserver, *Evicted or *Report) and checks it
// against layout l. The error names the first bad field.
func Decode(b []byte, l Layout) (any, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrBadMessage)
	}
	r := &reader{b: b[1:]}
	switch b[0] {
	case tagNewObserver:
		m := &NewObserver{Observer: r.u32("observer")}
		if r.err == nil && int64(m.Observer) >= int64(l.Nodes) {
			r.fail("observer: daemon %d, want < %d", m.Observer, l.Nodes)
		}
		if r.err == nil && len(r.b) != 0 {
			r.fail("%d trailing bytes", len(r.b))
		}
		return m, r.err
	case tagEvicted:
		m := &Evicted{Rank: r.u32("rank")}
		if r.err == nil && int64(m.Rank) >= int64(l.Nodes) {
			r.fail("rank: daemon %d, want < %d", m.Rank, l.Nodes)
		}
		if r.err == nil && len(r.b) != 0 {
			r.fail("%d trailing bytes", len(r.b))
		}
		return m, r.err
	case tagReport:
		m := &Report{Source: r.u32("source"), Detector: r.u32("detector"), DetectedAt: int64(r.u64("detectedAt"))}
		n := r.count("D", 4)
		ds := make([]ranks.Rank, n)
		for i := range ds {
			ds[i] = r.u32("D")
		}
		if r.err == nil {
			set, err := ranks.FromSorted(ds)
			if err != nil {
				r.fail("D: %v", err)
			}
			m.D = set
		}
		if n = r.count("Nodes", 4); n > 0 {
			m.Nodes = make([]ranks.Rank, n)
			for i := range m.Nodes {
				m.Nodes[i] = r.u32("Nodes")
			}
		}
		if n = r.count("Procs", 5); n > 0 {
			m.Procs = make([]ProcFailure, n)
			for i := range m.Procs {
				m.Procs[i].Rank = r.u32("Procs")
				if r.err == nil {
					m.Procs[i].Cause = Cause(r.b[0])
					r.b = r.b[1:]
				}
			}
		}
		if r.err == nil && len(r.b) != 0 {
			r.fail("%d trailing bytes", len(r.b))
		}
		if r.err != nil {
			return nil, r.err
		}
		if err := m.Validate(l); err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w: unknown type %q", ErrBadMessage, b[0])
}
