// Package verbs is Vigil's RDMA transport (transport.Transport over
// libibverbs, through package github.com/vigil-hpc/vigil/verbs): heartbeats
// are RDMA WRITEs into the observer's registered slot array, messages
// (NEWOBSERVER, LEAVE, EVICTED, broadcasts, agreement) are UD datagrams
// with a minimal reliability layer, and go over RC SEND through a small
// pool of RC QPs sharing one receive queue to a peer that was sent one
// above one datagram.
//
// # Heartbeats
//
// Every rank registers one slot array: N 64-bit words in mmap'ed memory,
// and nothing else of its memory is registered for remote access. On a
// device with type 2 memory windows (rxe has them) the array is not
// remotely writable through its own rkey at all: when an emitter connects,
// the observer binds a window over that emitter's word alone, through the
// observer's end of that emitter's link, and sends its rkey in CONNACK, so
// an emitter can write its own word and nothing else, and only over its
// link. Without windows (or with Config.NoWindows) the array is
// REMOTE_WRITE and its rkey reaches every word. The node's observer check is the atomic load of its emitter's
// word there (node.Config.Slots = Transport.Slots), the same load as over
// TCP. An emitter writes its sequence number into word [emitter] of its
// observer's array with one inline RDMA WRITE over an RC QP (verbs.Writer:
// every write signalled, its CQ polled in the same cgo call, so a failed
// or stalled link is seen within a period). The slot
// address and rkey come from the bootstrap exchange (Address); the RC QP
// numbers from a handshake over the UD channel the first time an emitter
// targets an observer (hblink.go), during which heartbeats go as
// authenticated UD datagrams (HEARTBEAT packets) into the same word. A
// failed RC write is extra evidence only: see hbLink.
//
// # Messages: UD with reliability, not RC to overlay neighbours
//
// Each datagram is one wire Msg frame, authenticated like the TCP
// transport's (job ID, sender rank and incarnation in the header, a 16-byte
// tag under the job key) but tagged with SipHash-2-4-128 (wire.MACSipHash)
// rather than HMAC-SHA256, a sixth of the cost per datagram under emulation
// (BenchmarkDatagramMAC); the receiver also checks that it came from the UD
// QP the sender published, and that its payload names the receiver's own
// incarnation (proto.go). Inside, reliable.go adds per-peer sequence
// numbers, cumulative acks, retransmission with exponential back-off (a
// timeout of the measured round trip plus four deviations, at least 20 ms,
// doubling to 640 ms, 10 tries; the first timeout resends only the oldest
// packet, since on a loaded host the ack is late more often than the
// packet lost), in-order delivery with duplicate
// suppression, fragmentation above one path MTU, and gives up on a peer
// that stops acking (counted as dropped, as TCP drops to a dead peer).
// Acks ride on the DATA packets going the other way (a reply acknowledges
// its request); what is still owed when the progress engine has handled
// a batch of datagrams goes out as one cumulative ACK per peer.
//
// # Restarts and replay
//
// A rank that restarts opens a new transport: a new incarnation, a new UD
// QP and slot array, published as a new address (Address.Inc is the
// incarnation). SetPeers gives it to the other ranks, as the TCP
// transport's SetPeers does. A newer incarnation of rank r, learned from
// SetPeers or from a datagram of r's from the QP its address names, makes
// the engine forget the previous one (peerRestarted): what was queued or
// unacknowledged towards r is dropped (MsgsDropped), the reliability state
// both ways starts again from sequence number 1, r's address handle is
// replaced, the heartbeat links to and from r are dropped (new ones are
// set up by the next heartbeats), and this rank's slot word for r is set
// to 0, so that the new incarnation's heartbeats, counting from 1, move
// it. Datagrams of an older incarnation than the newest known are
// rejected as stale, from whichever QP they come; a new incarnation's
// datagrams that arrive before its address are rejected as
// wrong_source_qp (they are retransmitted; heartbeats among them are lost).
//
// A datagram replayed by someone on the fabric (from the sender's QP, as
// the source check requires) is rejected and counted in
// Stats().Rejected: within the receiver's incarnation, a DATA packet
// whose sequence number was already received as "duplicate" (a
// retransmission after a lost or late ack is counted there too) and a
// heartbeat datagram that does not move the slot word as "old_heartbeat"
// (so is a datagram overtaken by an RDMA write); a datagram meant for a
// previous incarnation of the receiver, whose sequence numbers start
// afresh, as "wrong_incarnation"; one of a previous incarnation of the
// sender as "stale". A replayed ACK acknowledges nothing new and is not
// counted. The guest tests TestReplayWithinIncarnation,
// TestReplayToRestartedReceiver and TestRestartedRankRejoins replay
// captured datagrams of each kind.
//
// # Large messages: RC message links
//
// Fragmenting costs per datagram (a post, a MAC, a completion, a copy,
// the engine's turn) what RC does once per message: the first message to
// a peer above one datagram asks for a message link (rcmsg.go), an RC QP
// set up by the heartbeat links' handshake over the reliable UD channel
// (MSGREQ, MSGACK, MSGUP; its QPs made by the link worker), and from then
// on every message to that peer goes as RC SENDs of authenticated 16 KiB
// chunks. A node holds at most 8 links;
// a ninth peer takes the least recently used idle one (MSGCLOSE tells its
// peer), and while none is idle it stays on UD. All links share one SRQ
// of 32 registered buffers, one CQ (with a channel the engine sleeps on)
// and 32 send buffers: ≈ 1 MiB registered, only on a rank that exchanges
// messages above one datagram. Order per peer holds across the two paths:
// nothing is posted on a link while a datagram to that peer is
// unacknowledged, the receiver polls its RC completions before its
// datagrams, and a link that breaks (a completion in error, MSGCLOSE)
// sends the messages it did not confirm again over UD before any newer
// one, numbered, so the receiver delivers each once (VerbsStats.RCMsg*).
//
// Why UD: the broadcast overlays (HBA, BMG) are relabelled over the alive
// set relative to each broadcast's source, so the ranks a node sends to
// change with the source and with every failure. RC to "overlay
// neighbours" would mean connecting, over time, to most of the job, each
// connection needing its own handshake, receive buffers and NIC QP context.
// UD needs one QP per node whatever N, an address handle per rank actually
// messaged, and one receive ring.
//
// Per-node cost (measured at N = 64 on soft-RoCE, TestCostN64, path MTU
// 1024; computed for N = 4,096 from the same formulas):
//
//	                     N = 64 (measured)    N = 4,096 (computed)
//	QPs                  3                    3   (1 UD, 1 RC active, 1 RC passive; ≤ 1+1+4)
//	AHs                  ≤ 2 (ring test)      ≤ ranks messaged (~2·log2 N = 24 per broadcast, ≤ N)
//	registered memory    410,112 B            442,368 B (8·N slots + 256×1,088 ring + 128×1,024 send)
//	verbs objects        16                   16 + AHs (a window and a word region per passive link)
//
// A rank that sends or receives messages above one datagram adds up to 8
// RC QPs (message links), an SRQ, a CQ and 1,052,672 B registered (2 × 32
// buffers of 16,448 B).
//
// RC to overlay neighbours instead, at N = 4,096: 2·log2 N = 24 RC QPs per
// node for the HBA overlay's neighbours of one source (more as sources and
// failures vary), each with its own receive queue (24 × 32 × 1 KiB = 768 KiB
// registered without an SRQ), plus the heartbeat RC QPs.
//
// # Threads
//
// The emitter thread calls SendHeartbeat (no allocation once a link or the
// peer's address handle exists; over a link no lock and no atomic
// read-modify-write either: the emitter thread owns the link's Writer and
// frees replaced links itself, see hbLink). Everything else is run by one
// progress engine per transport (engine.go): a goroutine (on a locked OS
// thread with Config.LockThread) that runs the UD QP, its CQs, the receive
// ring, the send buffers, the reliability layer with its retransmission
// and delayed-ack timers, and the RC handshakes' messages. The verbs
// objects of the heartbeat links (QP creation, connection, the window
// bind, destruction) and the message links' QPs are made and destroyed by
// a link worker goroutine (linker.go), so that setting up a link, which
// happens when an observer dies and failures are being propagated, or
// when a peer becomes a frequent partner, never stalls a message. Send and the emitter's UD
// heartbeats never wait for it: they post themselves when its state is
// free (a TryLock) and otherwise hand the work to it through a queue, as
// link requests do; received messages go to the handler from the engine
// itself, which releases its state while the handler runs, so a reply
// the handler sends is posted at once by its Send. After a message sent or received it busy-polls for
// Config.PollFor (default 1 ms; heartbeat datagrams do not count), then
// arms the receive CQ (and the message links' CQ) and sleeps in poll(2)
// on their completion channels, the device's asynchronous event
// descriptor and an eventfd a sender writes only when it sleeps, with a timeout only while a
// retransmission is pending: an idle detector costs nothing and wakes
// nothing. Small frames (every heartbeat and ACK, and messages up to the
// UD QP's inline limit less 78 bytes of headers and tag) are posted
// inline, without a send buffer, and only one in 32 is signalled. The
// engine also reads the device's asynchronous events (async.go: a QP error
// on a heartbeat link breaks it, a port going down is logged and counted,
// a UD QP, CQ or device error fails the transport: it stops heartbeating
// so that the rank is suspected and evicted, never alive but mute).
// Close frees every verbs object and fails if any is left (a leak is an
// error).
package verbs
