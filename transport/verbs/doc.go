// Package verbs is Vigil's RDMA transport: transport.Transport over
// libibverbs (through package github.com/vigil-hpc/vigil/verbs), built with
// the tag verbs.
//
//   - Heartbeats are inline RDMA WRITEs of the emitter's sequence number
//     into its word of the observer's registered slot array, over one RC QP
//     per emitter→observer link (hblink.go); the observer's check is the
//     same atomic load as over TCP. With type 2 memory windows an emitter
//     can write its own word and nothing else. Until a link is up, and when
//     one fails, heartbeats go as authenticated UD datagrams into the same
//     word; a failed RC write is evidence only, never a suspicion.
//   - Messages are UD datagrams carrying the TCP transport's frames, tagged
//     with SipHash-2-4-128 under the job key, naming the receiver's
//     incarnation and accepted only from the sender's published QP
//     (proto.go), with a reliability layer:
//     sequence numbers, cumulative acks, retransmission with back-off,
//     in-order delivery, fragmentation (reliable.go). Replayed datagrams
//     and those of older incarnations are rejected and counted; a restarted
//     peer's state is forgotten.
//   - Messages above one datagram go to that peer as RC SENDs over a
//     message link, one of at most 8 RC QPs sharing one SRQ (rcmsg.go),
//     in order with the UD path.
//
// Threads: the emitter thread calls SendHeartbeat; one progress engine
// goroutine per transport (engine.go) runs the UD QP, the completion
// queues, the reliability layer and the handshakes, a state owned by one
// lock whose other holders never wait for it (engine.go states the
// model), busy-polls for
// Config.PollFor after traffic and then sleeps on the completion channels;
// a link worker goroutine (linker.go) creates and destroys the links' verbs
// objects so that no message waits for a QP to be set up. The engine also
// reads the device's asynchronous events (async.go): a UD QP, CQ or device
// error fails the transport, which stops heartbeating so that the rank is
// evicted rather than alive but mute. Close frees every verbs object and
// fails if one is left.
//
// The design, with why UD rather than RC to overlay neighbours and the cost
// per node, is in docs/verbs-transport.md; measurements in verbs/RESULTS.md.
package verbs
