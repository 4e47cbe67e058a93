package detector

import (
	"log/slog"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// Time is the current time as the caller's clocks read it: Mono on
// CLOCK_MONOTONIC (the ring's deadlines) and Wall in Unix nanoseconds (the
// detection time a broadcast carries). Both in nanoseconds.
type Time struct {
	Mono, Wall int64
}

// Send is one message to send to each rank of To, encoded once.
type Send struct {
	To  []ranks.Rank
	Msg wire.Message
}

// Event reports that a rank is gone: delivered once per rank.
type Event struct {
	// Rank is the rank that died or left.
	Rank ranks.Rank
	// Left is true for a clean departure, false for a crash.
	Left bool
	// Detector is the rank whose observer found it, or Rank itself for a
	// crash learned from an agreement's decided dead set (agreed.go).
	Detector ranks.Rank
	// DetectedAt is the detector's wall-clock time of detection (Unix ns).
	DetectedAt int64
	// Delivered is when this rank learned it: the time of the input that
	// taught it (Observe, Step, Tick).
	Delivered Time
}

// Decision is an agreement decided at this rank.
type Decision struct {
	Op AgreeOp
	era.Decision
}

// Note is a driver's payload broadcast by another rank (Core.Publish),
// delivered once.
type Note struct {
	// Source is the rank that published it, At its wall clock then (Unix ns).
	Source ranks.Rank
	At     int64
	// Payload is the published content; the driver may keep it.
	Payload []byte
}

// Log is a line the caller should log.
type Log struct {
	Level slog.Level
	Msg   string
	Args  []any
}

// Ready is what the Core asks its driver to do, in this order: point the
// heartbeat thread (Retarget) and the checks (Watch), send the messages,
// deliver the events and decisions, log.
type Ready struct {
	// Retarget: the heartbeat thread must heartbeat Observer from now on,
	// or pause when Alone.
	Retarget bool
	Observer ranks.Rank
	Alone    bool
	// Watch: the ring observes a new emitter; the checks must look at
	// Emitter's heartbeat word.
	Watch   bool
	Emitter ranks.Rank
	// Sends are the messages to send, in order.
	Sends []Send
	// Events are the ranks newly known gone, in delivery order.
	Events []Event
	// Decisions are the agreements decided.
	Decisions []Decision
	// Notes are the other ranks' published payloads, each delivered once.
	Notes []Note
	// Evicted: the job declared this rank dead. The heartbeat thread must
	// stop and the process should exit, as a crashed one would have; the
	// Core takes no input any more.
	Evicted bool
	// Minority is set with Evicted when the stop is this rank's own: it
	// holds more than half of its membership dead, or exactly half
	// without the membership's lowest rank (quorum.go): it is on the
	// minority side of a partition, or the job lost most of its ranks.
	Minority bool
	// Logs are what happened worth logging.
	Logs []Log
}

// Empty reports whether r asks for nothing.
func (r *Ready) Empty() bool {
	return !r.Retarget && !r.Watch && !r.Evicted && len(r.Sends) == 0 && len(r.Events) == 0 &&
		len(r.Decisions) == 0 && len(r.Notes) == 0 && len(r.Logs) == 0
}

// Stats counts the Core's activity.
type Stats struct {
	// BcastsStarted, BcastsForwarded count the broadcasts this rank started
	// and the broadcast messages it sent on behalf of others.
	BcastsStarted, BcastsForwarded uint64
	// NotesPublished counts the notes this rank published (Publish); their
	// messages count in BcastsStarted and BcastsForwarded too.
	NotesPublished uint64
	// SyncsSent counts the dead-list repair's requests, answers and ring
	// pushes; SyncsPushed the ring pushes among them (repair.go).
	SyncsSent, SyncsPushed uint64
	// BadMessages counts messages that made no sense.
	BadMessages uint64
	// Evictions counts EVICTED notices sent to zombies.
	Evictions uint64
	// SplitProbes counts the probes sent to ranks held dead by a rank that
	// holds more than half of the job dead (split.go).
	SplitProbes uint64
	// DeathsLearned and Departures count the crashes and the clean
	// departures delivered (Ready.Events), each rank once; Reported
	// counts those crashes this rank's own observer detected.
	DeathsLearned, Departures, Reported uint64
	// DeparturesRead counts the departures this rank took from a life
	// word that said hb.LifeDeparted (Life) rather than from a LEAVE.
	DeparturesRead uint64
	// DeathsAgreed counts the crashes among DeathsLearned that this rank
	// learned from an agreement's decided dead set (agreed.go).
	DeathsAgreed uint64
	// Stalls counts the stalls past δ of this rank that the driver
	// reported (Stalled).
	Stalls uint64
}
