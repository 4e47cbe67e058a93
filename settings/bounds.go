package settings

import (
	"fmt"
	"math"
	"time"
)

// Bounds of the timing settings.
const (
	// MinHeartbeatPeriod is the shortest h (and check period): below it the
	// heartbeat thread would spend its CPU waking up.
	MinHeartbeatPeriod = 10 * time.Microsecond
	// MaxHeartbeatPeriod is the longest h.
	MaxHeartbeatPeriod = time.Minute
	// MinSuspectTimeout is the shortest δ (which must also be ≥ 2h).
	MinSuspectTimeout = 100 * time.Microsecond
	// MaxSuspectTimeout is the longest δ (and check period).
	MaxSuspectTimeout = time.Hour
	// MaxStartGrace is the longest start-up grace (above the default's
	// largest, 2s + MaxSuspectTimeout).
	MaxStartGrace = 2 * time.Hour
	// MaxStartTimeout is the longest bound on the C library's start.
	MaxStartTimeout = time.Hour
	// RealTimeMinPeriod is the shortest h for which a real-time heartbeat
	// thread is accepted (RealTime): a SCHED_FIFO thread waking faster
	// would starve the CPU it runs on.
	RealTimeMinPeriod = 50 * time.Microsecond
)

// BoundError is a setting out of its bounds. Its Error names the Go
// field; In names the setting as another interface does.
type BoundError struct {
	Setting *Setting
	// Value is the setting's value: a duration, or an Int's value.
	Value time.Duration
	// Want is the bound, Other the setting it refers to (nil if none),
	// written where Want has %s.
	Want  string
	Other *Setting
}

// In is the error's text with the names of interface n.
func (e *BoundError) In(n Names) string {
	want := e.Want
	if e.Other != nil {
		want = fmt.Sprintf(want, e.Other.Name(n))
	}
	return e.Setting.show(n, e.Value) + ": want " + want
}

// Error implements error, with the Go field's name.
func (e *BoundError) Error() string { return "node: " + e.In(GoNames) }

// CheckBound checks an explicit value v of s against s's own bounds
// (not the ones that depend on other settings); 0 is the default and
// passes, as does any value of a setting without bounds.
func CheckBound(s *Setting, v time.Duration) error {
	if v == 0 || !s.Bounded() || (v >= s.Min && v <= s.Max) {
		return nil
	}
	if s.Max == math.MaxInt64 {
		return &BoundError{Setting: s, Value: v, Want: fmt.Sprintf("≥ %v (0: %s)", s.Min, s.Default)}
	}
	return &BoundError{Setting: s, Value: v, Want: fmt.Sprintf("%v to %v (0: %s)", s.Min, s.Max, s.Default)}
}
