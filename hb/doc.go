// Package hb is Vigil's observation ring: seed 000's Algorithm 1 as a pure
// state machine (Ring) with block mending for host crashes, the bounds on
// its stabilization time (Bound, BlockBound) and the enforcement of
// fail-stop on ranks held dead (Zombies).
//
// Every alive rank i observes one emitter, its closest alive predecessor on
// the ring, and is observed by its closest alive successor. The emitter
// writes an increasing sequence number into the observer's slot every h
// (task T1); the observer loads the slot and resets its suspicion deadline
// whenever the value grew (T2). When the deadline δ passes, the observer
// adds its emitter to D_i, finds the next alive predecessor with FindEmitter,
// sends it NEWOBSERVER and gives it 2δ to start heartbeating (T3), and the
// detection is handed to a broadcast (package bcast). An emitter that
// receives NEWOBSERVER(j) retargets its heartbeats to j at once (T4). A rank
// that learns a death from a broadcast adds it to D_i (T5).
//
// Side by side with the paper:
//
//	task T1 (HB-TIMEOUT)     heartbeat.Emitter, the pinned OS thread
//	task T2 (heartbeat)      Ring.Observe, when the slot word grew
//	task T3 (SUSP-TIMEOUT)   Ring.Observe, when the deadline passed
//	task T4 (NEWOBSERVER)    Ring.NewObserver
//	task T5 (BCASTMSG)       Ring.Learn (forwarding is bcast.Broadcaster)
//	FindEmitter(D_i)         Ring.findEmitter
//
// One extension changes T3 when RingConfig.Probe > 0, block mending
// (mend.go): the observer that finds its emitter dead also probes the next
// predecessors at once (PROBE / ALIVE, Ring.Alive) and, after one probe
// time-out, reports every one that did not answer and reconnects to the
// first that did. A dead block of b consecutive ranks (a host) is then
// known in about 2δ (BlockBound) instead of about 2bδ. With
// RingConfig.ProbeAfter = a the observer sends those probes once its
// emitter has been silent for a, before suspecting it: about a + δ.
// With host labels (RingConfig.Hosts) a round also probes the rest of its
// first candidate's host, so a dead host of any size is one round
// (HostBlockBound): 2δ, or a + δ with early probes.
//
// The core never reads a clock: callers pass now, a monotonic time in
// nanoseconds. Nor does it touch a thread, a system call or the heartbeat
// words: the heartbeat thread (T1 and the observer's checks) is package
// heartbeat, the words are transport.Slots, and they reach the ring only
// as the input of Ring.Observe (a WatchRecord, what the checks saw).
package hb
