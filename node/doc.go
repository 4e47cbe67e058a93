// Package node is Vigil's runtime: it composes the observation ring
// (package hb), a broadcast overlay (package bcast) and a transport into one
// failure detector per process, and offers it to applications.
//
// Each Node runs:
//   - the heartbeat emitter on its own locked OS thread (hb.Emitter), on
//     absolute deadlines of the monotonic clock;
//   - one event-loop goroutine that owns the protocol cores: it checks the
//     emitter's slot word every CheckPeriod (an atomic load), handles
//     NEWOBSERVER, LEAVE and broadcast messages, and publishes failure events.
//
// The event loop also runs the agreement service (agree.go): the Early
// Returning Agreement of seed 001 (package era), fed by the detector's
// failure events, offered as Agree, AgreeID and Shrink.
//
// Start a node with Start, read failures from Events or Dead, leave cleanly
// with Leave (the observer then reports a departure, not a crash), and stop
// it with Close, which joins every goroutine and the emitter thread.
package node
