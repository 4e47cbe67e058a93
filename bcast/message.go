package bcast

import "github.com/vigil-hpc/vigil/ranks"

// Kind says what a broadcast announces.
type Kind uint8

const (
	// Failed announces ranks detected dead by their observer (a crash).
	Failed Kind = 1
	// Left announces ranks that departed cleanly (not a crash).
	Left Kind = 2
	// Note announces no rank: it carries the driver's Payload to every
	// participant with the same overlay and tolerance (a daemon's report
	// of its local processes' failures, say).
	Note Kind = 3
)

func (k Kind) String() string {
	switch k {
	case Failed:
		return "failed"
	case Left:
		return "left"
	case Note:
		return "note"
	}
	return "unknown"
}

// ID identifies one broadcast: its source and the source's sequence number.
type ID struct {
	Source ranks.Rank
	Seq    uint64
}

// Message is the paper's BCASTMSG(dead, s, D).
type Message struct {
	ID   ID
	Kind Kind
	// Dead lists the ranks announced (seed 000's "dead"); one per detection
	// unless the runtime aggregates detections made close together.
	Dead []ranks.Rank
	// D is the source's dead list when it started the broadcast. It fixes
	// the participant set A = {0..N-1} \ D for the whole broadcast, as
	// seed 000 requires for the hypercube broadcast to stay fault tolerant.
	D ranks.Set
	// Detector is the rank whose observer detected the failure (the source
	// for a detection; the observer of a departing rank for Left).
	Detector ranks.Rank
	// DetectedAt is the detector's wall-clock time of detection in Unix
	// nanoseconds. Reporting only: no protocol decision depends on it.
	DetectedAt int64
	// Payload is a Note's content (empty for Failed and Left), at most
	// MaxPayload bytes.
	Payload []byte
}

// MaxPayload bounds a Note's Payload.
const MaxPayload = 1 << 16
