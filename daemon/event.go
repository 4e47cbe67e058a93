package daemon

import "github.com/vigil-hpc/vigil/ranks"

// Event kinds.
const (
	// KindProc: an application process is gone (Rank, Node, Cause).
	KindProc = "proc"
	// KindNode: a node (its daemon) failed; one KindProc event with cause
	// NodeDown follows for each process it hosted.
	KindNode = "node"
)

// Event is one failure as a daemon or a local process learns it. It is
// also the JSON line a daemon writes to its local processes.
type Event struct {
	Kind string     `json:"ev"`
	Rank ranks.Rank `json:"rank"` // KindProc only
	Node ranks.Rank `json:"node"`
	// Cause is a Cause's String (KindProc only).
	Cause string `json:"cause,omitempty"`
	// Detector is the daemon that observed the failure, DetectedUnix its
	// wall clock then.
	Detector     ranks.Rank `json:"detector"`
	DetectedUnix int64      `json:"detected_unix"`
	// DeliveredMono is when the receiver learned it (CLOCK_MONOTONIC ns);
	// set by the receiver, not sent.
	DeliveredMono int64 `json:"-"`
}

// nodeEvent is the event of daemon d's failure, found by detector at its
// wall clock at (Unix ns).
func nodeEvent(d, detector ranks.Rank, at int64) Event {
	return Event{Kind: KindNode, Node: d, Detector: detector, DetectedUnix: at}
}
