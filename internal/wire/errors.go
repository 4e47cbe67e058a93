package wire

import (
	"errors"
	"fmt"
)

// Rejection reasons: the Reason of an *Error, used as the keys of
// transport.Stats.Rejected.
const (
	ReasonBadMagic    = "bad_magic"    // the frame does not start with "VG"
	ReasonBadVersion  = "bad_version"  // unsupported frame version
	ReasonBadType     = "bad_type"     // unknown frame or message type
	ReasonForeignJob  = "foreign_job"  // the frame belongs to another job
	ReasonBadTag      = "bad_tag"      // authentication failed (wrong key or tampering)
	ReasonTruncated   = "truncated"    // the input ended inside a frame
	ReasonTooLarge    = "too_large"    // declared payload longer than the maximum
	ReasonUnknownRank = "unknown_rank" // sender rank ≥ N
	ReasonStale       = "stale"        // an old incarnation, or a sender other than the connection's
	ReasonNoHello     = "no_hello"     // a frame before the connection's Hello
	ReasonMisdirected = "misdirected"  // a Hello meant for another rank
	ReasonBadPayload  = "bad_payload"  // an authenticated frame or message with a malformed payload
	// Heartbeats (Beat): meant for another rank, for another incarnation
	// of this one, for no incarnation (its emitter has not learned this
	// one's yet), or not moving the emitter's word forwards (a replay, or
	// a datagram overtaken by a later one).
	ReasonWrongReceiver    = "wrong_receiver"
	ReasonWrongIncarnation = "wrong_incarnation"
	ReasonUnbound          = "unbound_heartbeat"
	ReasonOldHeartbeat     = "old_heartbeat"
)

// Error is a decoding or checking failure. Reason is one of the Reason
// constants; Field names the offending field of a message, if any.
type Error struct {
	reason string
	// Field is the offending field, such as "bcast.d" (empty for frame
	// header checks).
	Field string
	// Detail describes the failure.
	Detail string
}

// Reason returns the rejection reason, one of the Reason constants.
func (e *Error) Reason() string { return e.reason }

// Error formats the failure with its field and reason.
func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("wire: %s: %s (%s)", e.Field, e.Detail, e.reason)
	}
	return fmt.Sprintf("wire: %s (%s)", e.Detail, e.reason)
}

// ReasonOf returns the Reason of err if it wraps an *Error, and "" otherwise.
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.reason
	}
	return ""
}

func errf(reason, field, format string, args ...any) *Error {
	return &Error{reason: reason, Field: field, Detail: fmt.Sprintf(format, args...)}
}
