package wire

import (
	"encoding/binary"
	"math"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
)

// TypeSync is the type byte of a Sync message.
const TypeSync MsgType = 6

// MaxSyncRanks bounds both lists of a Sync: the ranks it asks about and the
// records it carries. A node with more to ask or tell sends several.
const MaxSyncRanks = 256

// SyncRecord is what a node knows about one rank in its dead list: the
// fields of the broadcast that taught it (or of its own detection).
type SyncRecord struct {
	// Rank is the rank that is gone.
	Rank ranks.Rank
	// Kind is bcast.Failed for a crash, bcast.Left for a clean departure.
	Kind bcast.Kind
	// Detector is the rank whose observer found it (or was told).
	Detector ranks.Rank
	// DetectedAt is the detector's wall-clock time of detection, Unix ns.
	DetectedAt int64
}

// Sync repairs dead lists (an extension to seed 000, see
// detector/repair.go). A node that receives a broadcast whose carried D
// holds ranks it does not hold dead asks the broadcast's source about them
// (Ask); the source answers with its Records of those it holds. An
// observer that just mended a segment of the ring also sends its new
// emitter the Records of the ranks in between, unasked. One message may ask and answer at once.
// Both lists are strictly increasing by rank, at most MaxSyncRanks long,
// and not both empty.
type Sync struct {
	Ask     []ranks.Rank
	Records []SyncRecord
}

// Type implements Message.
func (*Sync) Type() MsgType { return TypeSync }

// AppendTo encodes: type, the Ask count, its first rank and the strictly
// positive deltas between successive ranks (uvarints), then the Records
// count and each record: its rank (the first absolute, then the delta from
// the previous record's rank, uvarints), kind byte, detector (uvarint) and
// detected-at (8 bytes little-endian, two's complement). Lists that are not
// strictly increasing are written as given; every receiver rejects them.
func (m *Sync) AppendTo(dst []byte) []byte {
	dst = append(dst, byte(TypeSync))
	dst = binary.AppendUvarint(dst, uint64(len(m.Ask)))
	for i, r := range m.Ask {
		if i > 0 {
			r -= m.Ask[i-1]
		}
		dst = binary.AppendUvarint(dst, uint64(r))
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Records)))
	for i, rec := range m.Records {
		if i == 0 {
			dst = binary.AppendUvarint(dst, uint64(rec.Rank))
		} else {
			dst = binary.AppendUvarint(dst, uint64(rec.Rank-m.Records[i-1].Rank))
		}
		dst = append(dst, byte(rec.Kind))
		dst = binary.AppendUvarint(dst, uint64(rec.Detector))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(rec.DetectedAt))
	}
	return dst
}

// sync decodes the rest of a Sync message (everything after the type).
func (d *decoder) sync() *Sync {
	m := &Sync{}
	if c := d.syncCount("sync.ask"); c > 0 {
		m.Ask = make([]ranks.Rank, c)
		var prev uint64
		for i := range m.Ask {
			v := d.increasing("sync.ask", i, prev)
			m.Ask[i] = d.checkRank("sync.ask", v)
			prev = v
		}
	}
	if c := d.syncCount("sync.records"); c > 0 {
		m.Records = make([]SyncRecord, c)
		var prev uint64
		for i := range m.Records {
			rec := &m.Records[i]
			v := d.increasing("sync.records.rank", i, prev)
			rec.Rank = d.checkRank("sync.records.rank", v)
			prev = v
			rec.Kind = bcast.Kind(d.byte1("sync.records.kind"))
			if d.err == nil && rec.Kind != bcast.Failed && rec.Kind != bcast.Left {
				d.fail(ReasonBadType, "sync.records.kind", "unknown kind %d", rec.Kind)
			}
			rec.Detector = d.rank("sync.records.detector")
			rec.DetectedAt = int64(d.uint64le("sync.records.detected_at"))
		}
	}
	if d.err == nil && len(m.Ask) == 0 && len(m.Records) == 0 {
		d.fail(ReasonBadPayload, "sync", "asks and answers nothing")
	}
	if d.err != nil {
		return nil
	}
	return m
}

// syncCount reads a list length of a Sync, at most MaxSyncRanks.
func (d *decoder) syncCount(field string) int {
	c := d.count(field)
	if d.err == nil && c > MaxSyncRanks {
		d.fail(ReasonBadPayload, field, "%d ranks, at most %d allowed", c, MaxSyncRanks)
		return 0
	}
	return c
}

// increasing reads the i-th rank of a strictly increasing list encoded as
// a first value and positive deltas; prev is the previous rank. Ranks that
// overflow are reported by checkRank (the caller's).
func (d *decoder) increasing(field string, i int, prev uint64) uint64 {
	v := d.uvarint(field)
	if d.err != nil || i == 0 {
		return v
	}
	if v == 0 {
		d.fail(ReasonBadPayload, field, "not strictly increasing at index %d", i)
		return 0
	}
	if v += prev; v < prev { // wrapped
		v = math.MaxUint64
	}
	return v
}
