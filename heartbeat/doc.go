// Package heartbeat is Vigil's heartbeat thread: the emitter's task T1 of
// seed 000's Algorithm 1 and, on the same thread, the observer's checks of
// its own emitter's heartbeat word.
//
// Emitter is one goroutine locked to an OS thread. Every h it sends an
// increasing sequence number to the current observer through a SendFunc
// (a transport's SendHeartbeat: an RDMA write, a store into shared memory,
// or a packet the observer's receive path stores), on absolute deadlines of
// the monotonic clock so that lateness never accumulates, and it sends one
// at once when the observer changes (SetObserver, task T4). A period costs
// one system call to sleep (ppoll on an eventfd, woken early only to
// retarget or stop) plus the send; from ParkAbove up the thread waits on a
// runtime timer instead.
//
// With a CheckFunc the same thread runs the observer's check every few
// periods, so that checking costs no wake-up of its own. Watch is that
// check: one atomic load of the emitter's word in the observer's
// transport.Slots, recording when it last grew and re-arming after a
// stalled check. The event loop reads its record (an hb.WatchRecord) only
// when SUSP-TIMEOUT may have expired and hands it to hb.Ring.Observe
// (tasks T2 and T3). Check never blocks: a lock shared with a starved
// goroutine would make a real-time thread wait on it.
//
// The thread is locked because a heartbeat's timing must not depend on the
// Go scheduler finding a thread for a goroutine, and because CPU affinity
// (EmitterConfig.CPU, sched_setaffinity) and the scheduling policy
// (sched_setattr) belong to a kernel thread, not to a goroutine. With
// EmitterConfig.RealTime the thread runs SCHED_FIFO at
// EmitterConfig.Priority, so that CPU burners of normal priority do not
// delay the heartbeats; without privilege the kernel refuses it, which
// EmitterStats.RealTime reports and is not an error. EmitterConfig.HoldP
// makes the thread keep its Go scheduler P while it sleeps, so that it
// never waits for a P held by a starved normal-priority thread.
// Where the transport can make a heartbeat one store into a word mapped in
// this process (shared memory) or one datagram on a socket
// (EmitterConfig.Sink), the thread runs in C instead (native.c): a pthread
// the Go runtime never schedules, with the same loop and the same check
// (Watch's state and check are C, shared by both threads). Datagrams are
// signed in advance by a goroutine, a ring of them at a time. With
// EmitterConfig.Verify the thread receives the heartbeats waiting in the
// transport's socket itself at each check (recvmmsg) and accepts those
// equal to the frames its emitter will send, computed in advance the same
// way; the others (a new emitter's first ones, another sender's, a
// forgery) are checked by a goroutine, which then checks in the thread's
// place. With EmitterConfig.Sweep the transport's port has a second socket
// for every other sender's datagrams (transport.HeartbeatLanes): while
// the watched emitter is heard, the thread has a goroutine sweep it within
// a budget and checks at once, so no rate of junk there delays a check. Go resolves each target's Sink and publishes both to the thread
// (a sequence lock it never waits on). The thread enters Go only for a
// target without a Sink (the silence alarm too is rung by a goroutine),
// so a quiet job's heartbeats over shared memory or UDP wake nothing in
// Go but the signing, about twice a second at h = 1 ms. The Go thread
// remains for the other transports (verbs, memory) and for comparisons.
//
// SetProcessRealTime puts every thread of a process that runs only the
// detector under SCHED_RR (the emitter then needs a higher Priority);
// ThreadSched reads a thread's policy and priority back from /proc.
package heartbeat
