package bcast

import (
	"errors"
	"fmt"
	"slices"

	"github.com/vigil-hpc/vigil/ranks"
)

// ErrInvalid is wrapped by every error of Message.Validate and of the
// Propagators' Step.
var ErrInvalid = errors.New("bcast: invalid message")

// errorf returns an error wrapping ErrInvalid that names field.
func errorf(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// Validate checks m against a job of n ranks and returns an error wrapping
// ErrInvalid and naming the first bad field: Kind, ID.Source, ID.Seq,
// Dead (empty for Failed and Left, not empty for a Note) or Dead[i],
// Detector, Payload (on a kind other than Note, or too long), or D (a rank
// >= n, or the source).
func (m *Message) Validate(n int) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
	}
	switch {
	case n <= 0:
		return bad("n", "job size %d, want > 0", n)
	case m.Kind != Failed && m.Kind != Left && m.Kind != Note:
		return bad("Kind", "unknown kind %d", m.Kind)
	case int64(m.ID.Source) >= int64(n):
		return bad("ID.Source", "rank %d, want < n = %d", m.ID.Source, n)
	case m.ID.Seq == 0:
		return bad("ID.Seq", "0, sequence numbers start at 1")
	case len(m.Dead) == 0 && m.Kind != Note:
		return bad("Dead", "empty, a broadcast announces at least one rank")
	case len(m.Dead) > 0 && m.Kind == Note:
		return bad("Dead", "%d ranks in a note, which announces none", len(m.Dead))
	case len(m.Payload) > 0 && m.Kind != Note:
		return bad("Payload", "%d bytes on a %v broadcast", len(m.Payload), m.Kind)
	case len(m.Payload) > MaxPayload:
		return bad("Payload", "%d bytes, at most %d", len(m.Payload), MaxPayload)
	case int64(m.Detector) >= int64(n):
		return bad("Detector", "rank %d, want < n = %d", m.Detector, n)
	}
	for i, r := range m.Dead {
		if int64(r) >= int64(n) {
			return bad(fmt.Sprintf("Dead[%d]", i), "rank %d, want < n = %d", r, n)
		}
	}
	if ds := m.D.Members(); len(ds) > 0 && int64(ds[len(ds)-1]) >= int64(n) {
		return bad("D", "rank %d, want < n = %d", ds[len(ds)-1], n)
	}
	if m.D.Has(m.ID.Source) {
		return bad("D", "holds the source %d, which must be a participant", m.ID.Source)
	}
	switch h := &m.Hop; {
	case h.Phase > PhaseSOS:
		return bad("Hop.Phase", "unknown phase %d", h.Phase)
	case len(h.Known) > MaxF+1:
		return bad("Hop.Known", "%d ranks, at most %d", len(h.Known), MaxF+1)
	case h.Phase != PhaseFwd && h.Phase != PhaseBwd && len(h.Known) > 0:
		return bad("Hop.Known", "%d ranks in a %v message", len(h.Known), h.Phase)
	}
	for i, r := range m.Hop.Known {
		if int64(r) >= int64(n) {
			return bad(fmt.Sprintf("Hop.Known[%d]", i), "rank %d, want < n = %d", r, n)
		}
	}
	return nil
}

// maxPending bounds, per source, the sequence numbers remembered above the
// watermark (see Broadcaster).
const maxPending = 64

// seenSeqs is the duplicate-suppression memory for one source: every
// sequence number <= w has been seen, and above holds, sorted, the seen
// ones > w+1 (never more than maxPending).
type seenSeqs struct {
	w     uint64
	above []uint64
}

// mark records seq and reports whether it was new.
func (s *seenSeqs) mark(seq uint64) bool {
	if seq <= s.w {
		return false
	}
	i, found := slices.BinarySearch(s.above, seq)
	if found {
		return false
	}
	if seq == s.w+1 {
		s.w = seq
	} else {
		s.above = slices.Insert(s.above, i, seq)
		if len(s.above) > maxPending {
			// Presume the oldest missing broadcasts lost: jump the
			// watermark to the oldest pending sequence number.
			s.w = s.above[0]
			s.above = slices.Delete(s.above, 0, 1)
		}
	}
	j := 0
	for j < len(s.above) && s.above[j] == s.w+1 {
		s.w++
		j++
	}
	if j > 0 {
		s.above = slices.Delete(s.above, 0, j)
	}
	if len(s.above) == 0 {
		s.above = nil // free the backing array once caught up
	}
	return true
}

// Broadcaster is the per-node broadcast state machine shared by all
// overlays (seed 000 Algorithm 1 line 24 and task T5; seed 003 Algorithm 1
// Forwarding). It never blocks, reads no clock and is not safe for
// concurrent use.
//
// Duplicate suppression stays bounded forever: per source it keeps a
// watermark w (every sequence number <= w seen) and the seen sequence
// numbers above it, at most maxPending (64) of them. Sources number their
// broadcasts 1, 2, 3, ..., so in the normal case the watermark advances and
// nothing else is kept: one entry of a few words per source that ever
// broadcast (at most n sources, since Validate rejects sources >= n). If a
// broadcast from a source never arrives (self was not a participant, or
// more than k−1 failures cut it off) while 64 later ones do, the missing one
// is presumed lost: the watermark jumps over it, and should it arrive later
// it is dropped as a duplicate. No broadcast is ever delivered twice.
type Broadcaster struct {
	self ranks.Rank
	n    int
	o    Overlay
	seq  uint64 // last sequence number used by Start
	seen seenIDs
}

// NewBroadcaster returns the state machine of rank self in a job of n ranks
// forwarding along overlay o.
func NewBroadcaster(self ranks.Rank, n int, o Overlay) *Broadcaster {
	return &Broadcaster{self: self, n: n, o: o, seen: seenIDs{}}
}

// seenIDs is the duplicate-suppression memory of a Propagator: one
// seenSeqs per source.
type seenIDs map[ranks.Rank]*seenSeqs

// mark records id and reports whether it was new.
func (m seenIDs) mark(id ID) bool {
	s := m[id.Source]
	if s == nil {
		s = &seenSeqs{}
		m[id.Source] = s
	}
	return s.mark(id.Seq)
}

// Start begins a broadcast from self announcing dead (seed 000's
// BCASTMSG(dead, i, D_i)): it stamps it ID{Source: self, Seq: next}, marks
// it seen, and returns the message (Dead and D copied, Detector = self,
// which the caller may change) and the ranks to send it to,
// Neighbors(self, self, n, D). self must not be in D; if it is, or if
// self >= n, no rank is returned.
func (b *Broadcaster) Start(kind Kind, dead []ranks.Rank, D ranks.Set, detectedAt int64) (Message, []ranks.Rank) {
	b.seq++
	m := Message{
		ID:         ID{Source: b.self, Seq: b.seq},
		Kind:       kind,
		Dead:       slices.Clone(dead),
		D:          D.Clone(),
		Detector:   b.self,
		DetectedAt: detectedAt,
	}
	b.seen.mark(m.ID)
	return m, b.o.Neighbors(b.self, b.self, b.n, &m.D)
}

// Receive handles a broadcast message (seed 000 task T5). It rejects an
// invalid message (see Message.Validate) or a Broadcaster whose self >= n.
// On the first reception of m.ID it returns first = true (deliver m) and the
// ranks to forward m to: Neighbors(self, m.ID.Source, n, &m.D) minus the
// ranks in localDead (known dead here; sending to them is useless; localDead
// may be nil). If self is in m.D it is not a participant: it delivers but
// forwards nothing. Later receptions of the same ID return (false, nil, nil).
func (b *Broadcaster) Receive(m Message, localDead *ranks.Set) (first bool, forward []ranks.Rank, err error) {
	if int64(b.self) >= int64(b.n) {
		return false, nil, fmt.Errorf("%w: self: rank %d, want < n = %d", ErrInvalid, b.self, b.n)
	}
	if err := m.Validate(b.n); err != nil {
		return false, nil, err
	}
	if !b.seen.mark(m.ID) {
		return false, nil, nil
	}
	if m.D.Has(b.self) {
		return true, nil, nil
	}
	return true, withoutDead(b.o.Neighbors(b.self, m.ID.Source, b.n, &m.D), localDead), nil
}
