package verbs

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/vigil-hpc/vigil/transport"
	ibv "github.com/vigil-hpc/vigil/verbs"
)

// asyncEvery is how often the progress engine reads the device's
// asynchronous events while it polls; asleep, it waits on their
// descriptor too.
const asyncEvery = 50 * time.Millisecond

// drainAsync reads every pending asynchronous event of the device without
// waiting and acts on it.
func (st *state) drainAsync() {
	for {
		ev, ok, err := st.ctx.AsyncEvent(0)
		if err != nil {
			st.logLimited("async", slog.LevelError, "reading asynchronous events", "err", err)
			return
		}
		if !ok {
			return
		}
		st.handleAsync(ev)
	}
}

// handleAsync acts on one asynchronous event:
//
//   - a QP error on an emitter's heartbeat link marks the link broken, as
//     a failed write would: heartbeats go over UD and a new link is
//     requested (evidence about the observer, never a suspicion);
//   - a QP error on the observer's end of a link frees that end (the
//     emitter's writes then fail and it reconnects);
//   - a QP error on the UD QP, a CQ error or a fatal device error fails
//     the transport for good (failStop): it cannot carry messages any
//     more, so it stops the heartbeats too, and the rank is suspected by
//     its observer and evicted like a crashed one instead of staying alive
//     but mute;
//   - a port going down or up is logged and counted: while this node's
//     port is down nothing arrives, so an observer here may suspect its
//     emitter after δ (the detector's perfection assumes a working local
//     network, as seed 000 does).
func (st *state) handleAsync(ev ibv.AsyncEvent) {
	st.asyncEvents.Add(1)
	switch ev.Type {
	case ibv.EventQPFatal, ibv.EventQPReqErr, ibv.EventQPAccessErr:
		if ev.QPNum == st.ud.Num() {
			st.failStop("the UD QP entered an error state: messages cannot be carried", "event", ev.String())
			return
		}
		for i := range st.links {
			l := st.links[i].Load()
			if l == nil || l.qpn != ev.QPNum {
				continue
			}
			if !l.broken.Swap(true) {
				st.rcErrors.Add(1)
				st.log.Info("heartbeat link QP error: back to UD, reconnecting (evidence only, no suspicion)",
					"observer", l.peer, "event", ev.String())
			}
			return
		}
		for i, p := range st.passive {
			if p.qp.Num() == ev.QPNum {
				st.passive = append(st.passive[:i], st.passive[i+1:]...)
				st.freePassive(p)
				st.log.Info("observer end of a heartbeat link failed: freed", "emitter", p.emitter, "event", ev.String())
				break
			}
		}
	case ibv.EventPortErr:
		st.portErrors.Add(1)
		st.log.Warn("RDMA port down: no heartbeat or message can arrive or leave until it is back", "event", ev.String())
	case ibv.EventPortActive:
		st.log.Info("RDMA port active again", "event", ev.String())
	case ibv.EventCQErr, ibv.EventDeviceFatal:
		// The event does not say which CQ; none of ours can overrun (each
		// is at least twice its queues' depth), so a CQ error is the
		// device's or a bug, and the UD CQs may be the ones lost.
		st.failStop("RDMA device or CQ error: this transport cannot work any more", "event", ev.String())
	default:
		st.log.Info("RDMA asynchronous event", "event", ev.String())
	}
}

// ErrFailed is what SendHeartbeat and Send return (wrapped, with the
// reason) once the transport has failed for good: see failStop.
var ErrFailed = errors.New("verbs transport failed")

// failure is why the transport failed.
type failure struct{ err error }

// failStop fails the transport for good: its UD QP, one of its CQs or the
// device is gone, so it can neither send nor receive a message. Recovering
// (moving the UD QP back to RTS and reposting the receive ring) is
// possible only for a QP error, and apart from a receive error completion
// (which the receive ring recovers from by itself: see ibv.RecvRing) a UD
// QP enters the error state only on a local error (a bug or a corrupted
// resource) that would come back; CQ and device errors cannot be
// recovered at all. So the transport
// stops: SendHeartbeat and Send fail with ErrFailed from now on (counted
// in HeartbeatsDropped and MsgsDropped), its RC heartbeat writes stop
// with them, its observer suspects it after δ and the job evicts it, as it
// would a crashed process (fail-stop). Without this its heartbeats went on
// over the RC link, so nobody ever suspected the rank while every
// broadcast and agreement message it sent was lost.
func (t *Transport) failStop(reason string, args ...any) {
	f := &failure{err: fmt.Errorf("%w: %s", ErrFailed, reason)}
	if !t.failed.CompareAndSwap(nil, f) {
		return
	}
	t.log.Error("verbs transport failed: heartbeats stopped, so that this rank's observer suspects it and the job evicts it (fail-stop) instead of keeping a rank alive but mute",
		append([]any{"reason", reason}, args...)...)
}

var _ transport.Failer = (*Transport)(nil)

// Failure returns the error that failed the transport for good (wrapping
// ErrFailed), or nil while it works.
func (t *Transport) Failure() error {
	if f := t.failed.Load(); f != nil {
		return f.err
	}
	return nil
}

// checkUD is called when a UD completion was flushed: the device flushes
// work requests only once a QP is in the error state, which no
// asynchronous event reports when the transition was asked for (and Close,
// which asks for it, stops every goroutine first). A UD QP that is not in
// RTS fails the transport.
func (t *Transport) checkUD(what string) {
	if t.closed.Load() || t.failed.Load() != nil {
		return
	}
	st, err := t.ud.State()
	switch {
	case err != nil:
		t.failStop(fmt.Sprintf("%s and the UD QP cannot be queried: %v", what, err))
	case st != ibv.QPRTS:
		t.failStop(fmt.Sprintf("%s: the UD QP is in state %v", what, st))
	}
}
