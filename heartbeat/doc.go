// Package heartbeat is Vigil's heartbeat thread: the emitter's task T1 of
// seed 000's Algorithm 1 and, on the same thread, the observer's checks of
// its own emitter's heartbeat word.
//
// Emitter is one thread. Every h it sends an increasing sequence number to
// the current observer (a store into shared memory, a UDP datagram or an
// RDMA write), on absolute deadlines of the monotonic clock so that
// lateness never accumulates: the multiples of h plus the process's slot
// (pid mod 8 eighths of h), so that the threads of a host with the same
// period share 8 timer interrupts a period instead of taking one each,
// while their checks stay spread over the period; and at once when the
// observer changes
// (SetObserver, task T4). A period costs one system call to sleep plus the
// send. With EmitterConfig.Watch the same thread runs the observer's check
// every few periods, so that checking costs no wake-up of its own: a Watch
// loads the emitter's word in the observer's transport.Slots and records
// when it last grew; the event loop hands that record (Watch.Record, an
// hb.WatchRecord) to the detector (tasks T2 and T3). A check never blocks.
//
// The thread is an OS thread, so that a heartbeat's timing does not depend
// on the Go scheduler and so that CPU affinity and SCHED_FIFO
// (EmitterConfig.CPU, RealTime, Priority) apply to it. Where every send is
// a store or a datagram (EmitterConfig.Sink), it is a C pthread the Go
// runtime never schedules (native.c), which can also receive and
// authenticate the observer's datagrams itself (EmitterConfig.Verify,
// Sweep): a quiet job's heartbeats then wake nothing in Go but the signing
// of datagrams in advance. Otherwise (verbs, the in-memory transport) it is
// a goroutine locked to its thread. EmitterConfig's fields document each
// mode; docs/architecture.md ("The two data paths") the whole path. With
// EmitterConfig.Life the thread also stores the time of each period into
// a life word, its own rank's word of its slot array, which the ranks of
// its host read as evidence that it runs (hb/life.go).
//
// SetProcessRealTime puts every thread of a process that runs only the
// detector under SCHED_RR (the emitter then needs a higher Priority);
// ThreadSched reads a thread's policy and priority back from /proc.
package heartbeat
