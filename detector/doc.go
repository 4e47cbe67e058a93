// Package detector is Vigil's failure detector as one pure state machine:
// the observation ring (hb.Ring, seed 000 Algorithm 1), the broadcast that
// propagates each detection (bcast.Broadcaster), the dead-list repair, the
// fail-stop enforcement on zombies and the agreements (era.Core, seed 001),
// tied together once.
//
// It follows etcd-io/raft's RawNode: the caller feeds inputs — what the
// heartbeat thread's checks saw (Observe), a received message (Step), the
// passing of time (Tick), an agreement to start (Agree), the heartbeat
// words it asked for (Words) — and then takes a Ready batch: messages to
// send, where the heartbeat thread must point, events to deliver,
// agreement decisions, and what to log; NextWake is the one answer to
// when it must be called again (wake.go). The Core reads
// no clock, starts no goroutine, opens no socket and logs nothing: every
// environment (the node runtime, the daemons, the simulator, tests) drives the same
// Core, so the simulated detector is the shipped one.
//
// Side by side with seed 000:
//
//	task T2, T3 (heartbeat, SUSP-TIMEOUT)  Core.Observe → hb.Ring.Observe
//	task T4 (NEWOBSERVER)                  Core.Step(*wire.NewObserver)
//	task T5 (BCASTMSG)                     Core.Step(*wire.Bcast): Learn, deliver, forward
//	StartPropagation                       Core.detected → bcast.Broadcaster.Start
//
// Outside the paper: the dead-list repair (repair.go), the eviction of
// zombies (zombies.go), the agreements' glue (agree.go), and notes: a
// driver's payload broadcast over the same overlay as a failure
// (Core.Publish, Ready.Notes), which the node-level daemons use for their
// reports of local process failures (seed 003).
package detector
