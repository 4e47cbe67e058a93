// Package node is Vigil's runtime: it composes the observation ring
// (package hb), the heartbeat thread (package heartbeat), a broadcast
// overlay (package bcast) and a transport into one failure detector per
// process, and offers it to applications.
//
// Each Node runs:
//   - the heartbeat emitter on its own locked OS thread
//     (heartbeat.Emitter), on absolute deadlines of the monotonic clock;
//   - one event-loop goroutine that owns the protocol cores: it checks the
//     emitter's slot word every CheckPeriod (an atomic load), handles
//     NEWOBSERVER, LEAVE, broadcast and SYNC messages, and publishes failure
//     events.
//
// The event loop also runs the agreement service (agree.go): the Early
// Returning Agreement of seed 001 (package era), fed by the detector's
// failure events, offered as Agree, AgreeID and Shrink.
//
// Dead-list repair (sync.go) is an extension to seed 000. Beyond Theorem
// 1's ⌊log2 N⌋−1 overlapping failures a broadcast can miss a survivor (at
// N = 8, ranks 1, 2 and 3 crashing at once: rank 4's broadcast of 3, with
// D = {3}, cannot reach rank 0 through the dead 1 and 2), and T5 alone never
// repairs it, since receivers add only the announced ranks to D_i. Two
// digest checks do. A node that receives a broadcast whose carried D holds
// ranks it does not hold dead asks the broadcast's source for their records
// (a SYNC message); and an emitter that gets NEWOBSERVER from a new observer
// asks it about the ranks strictly between them on the ring, which the
// observer skipped as dead. The answer's records (rank, crash or departure,
// detector, detection time) are delivered as T5 deliveries are: events,
// observer retargeting, the agreements' Part 4 and zombie tracking apply,
// and a departure stays a departure. A rank is asked about at most once per
// δ; lists are at most wire.MaxSyncRanks long. What stays uncovered: a lost
// broadcast followed by no later broadcast reaching the node and no ring
// change next to it (typically the very last failure of a burst).
//
// Start a node with Start, read failures from Events or Dead, leave cleanly
// with Leave (the observer then reports a departure, not a crash), and stop
// it with Close, which joins every goroutine and the emitter thread.
package node
