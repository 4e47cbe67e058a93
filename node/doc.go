// Package node is Vigil's runtime: it drives one failure detector per
// process (detector.Core: the observation ring, the broadcast of each
// detection, the dead-list repair, the eviction of zombies and the
// agreements) with the heartbeat thread (package heartbeat) and a
// transport, and offers it to applications.
//
// Each Node runs:
//   - the heartbeat thread (heartbeat.Emitter), on absolute deadlines of the
//     monotonic clock, which also runs the observer's checks of its
//     emitter's heartbeat word;
//   - one event-loop goroutine, the Core's only driver (node.go): it waits
//     for the earliest of a message, a request, the checks' alarm and the
//     Core's next wake-up, feeds the Core, sends the messages it asks for,
//     points the heartbeat thread and delivers failure events.
//
// The agreement service (agree.go) offers the Core's Early Returning
// Agreement (seed 001) as Agree, AgreeID and Shrink. Config holds the
// settings; bounds.go their limits.
//
// Start a node with Start, read failures from Events or Dead, leave cleanly
// with Leave (the observer then reports a departure, not a crash), and stop
// it with Close, which joins every goroutine and the emitter thread.
package node
