package verbs

import (
	"log/slog"
	"time"

	ibv "github.com/vigil-hpc/vigil/verbs"
)

// asyncEvery is how often the receive goroutine reads the device's
// asynchronous events: each time it is about to sleep on its CQ channel
// (whose wait is bounded by the same period), and at least this often
// while it polls.
const asyncEvery = 50 * time.Millisecond

// drainAsync reads every pending asynchronous event of the device without
// waiting and acts on it (receive goroutine).
func (t *Transport) drainAsync() {
	for {
		ev, ok, err := t.ctx.AsyncEvent(0)
		if err != nil {
			t.logLimited("async", slog.LevelError, "reading asynchronous events", "err", err)
			return
		}
		if !ok {
			return
		}
		t.handleAsync(ev)
	}
}

// handleAsync acts on one asynchronous event:
//
//   - a QP error on an emitter's heartbeat link marks the link broken, as
//     a failed write would: heartbeats go over UD and a new link is
//     requested (evidence about the observer, never a suspicion);
//   - a QP error on the observer's end of a link frees that end (the
//     emitter's writes then fail and it reconnects);
//   - a QP error on the UD QP, a CQ error or a fatal device error is
//     logged as an error: this transport cannot carry messages any more;
//   - a port going down or up is logged and counted: while this node's
//     port is down nothing arrives, so an observer here may suspect its
//     emitter after δ (the detector's perfection assumes a working local
//     network, as seed 000 does).
func (t *Transport) handleAsync(ev ibv.AsyncEvent) {
	t.asyncEvents.Add(1)
	switch ev.Type {
	case ibv.EventQPFatal, ibv.EventQPReqErr, ibv.EventQPAccessErr:
		if ev.QPNum == t.ud.Num() {
			t.log.Error("the UD QP entered an error state: messages cannot be carried", "event", ev.String())
			return
		}
		for i := range t.links {
			l := t.links[i].Load()
			if l == nil || l.qp.Num() != ev.QPNum {
				continue
			}
			if !l.broken.Swap(true) {
				t.rcErrors.Add(1)
				t.log.Info("heartbeat link QP error: back to UD, reconnecting (evidence only, no suspicion)",
					"observer", l.peer, "event", ev.String())
			}
			return
		}
		t.relMu.Lock()
		for i, p := range t.passive {
			if p.qp.Num() == ev.QPNum {
				t.passive = append(t.passive[:i], t.passive[i+1:]...)
				if err := t.closePassive(p); err != nil {
					t.logLimited("passive", slog.LevelWarn, "closing a failed passive QP", "err", err)
				}
				t.log.Info("observer end of a heartbeat link failed: freed", "emitter", p.emitter, "event", ev.String())
				break
			}
		}
		t.relMu.Unlock()
	case ibv.EventPortErr:
		t.portErrors.Add(1)
		t.log.Warn("RDMA port down: no heartbeat or message can arrive or leave until it is back", "event", ev.String())
	case ibv.EventPortActive:
		t.log.Info("RDMA port active again", "event", ev.String())
	case ibv.EventCQErr, ibv.EventDeviceFatal:
		t.log.Error("RDMA device error: this transport cannot work any more", "event", ev.String())
	default:
		t.log.Info("RDMA asynchronous event", "event", ev.String())
	}
}
