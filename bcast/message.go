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
	// Hop is what a corrected gossip's sender adds to each copy it sends
	// (zero for the overlays).
	Hop Hop
}

// Phase is the part of a corrected gossip a message belongs to.
type Phase uint8

const (
	// PhaseNone marks an overlay's message.
	PhaseNone Phase = iota
	// PhaseGossip is the dissemination (random gossip, or the tree).
	PhaseGossip
	// PhaseFwd, PhaseBwd and PhaseSOS are the correction's messages
	// (CorrFwd, CorrBwd, CorrSOS).
	PhaseFwd
	PhaseBwd
	PhaseSOS
)

// Hop is the per-copy part of a corrected gossip's message.
type Hop struct {
	// Phase says which part of the gossip sent it.
	Phase Phase
	// Step is the sender's step (in units of o from the broadcast's
	// start) when it sent: the receiver sets its own step clock by it.
	Step uint32
	// Known is, for FCG, the sender's closest known g-nodes on the side
	// the message comes from, closest first (at most MaxF+1).
	Known []ranks.Rank
}

// MaxPayload bounds a Note's Payload.
const MaxPayload = 1 << 16

func (p Phase) String() string {
	switch p {
	case PhaseNone:
		return "none"
	case PhaseGossip:
		return "gossip"
	case PhaseFwd:
		return "forward"
	case PhaseBwd:
		return "backward"
	case PhaseSOS:
		return "sos"
	}
	return "unknown"
}
