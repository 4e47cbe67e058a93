// Package shm gives heartbeats between ranks of one host a shared-memory
// path: the emitter's heartbeat is one atomic store into its observer's
// slot word, and the observer's check is the same load as for any other
// transport. Nothing is sent, and nothing wakes up on either side: it is
// the design's flag word, written by the CPU instead of a NIC.
//
// A Region is an observer's slot array in a memfd, offered to the ranks of
// its host through an abstract Unix socket named after the job and the rank
// (abstract sockets are per network namespace, so only ranks that share the
// host and its network namespace find it). An emitter that connects gets
// the memfd (SCM_RIGHTS) and an authenticated frame naming the observer
// under the job key, and checks that the observer runs under its own user.
//
// Wrap puts the shared-memory path in front of any transport: Send goes to
// the inner transport; SendHeartbeat stores into the observer's region
// when this rank has mapped it, and otherwise sends through the inner
// transport while a background attach to the observer is tried (once per
// observer, then again after a back-off). The transport of each link is
// thus chosen automatically: shared memory on the host, the network (UDP or
// verbs) to other hosts. LifeWord maps a rank's region the same way to
// read its life word, the word of its own rank, which its heartbeat thread
// raises every period: a prober's evidence that the rank runs.
//
// Trust: every process of the job's user on the host can map a region and
// write any word of it, as it could ptrace the observer anyway. The region
// holds heartbeat words and its owner's life word only.
package shm
