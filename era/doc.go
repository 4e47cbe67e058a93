// Package era is Vigil's agreement core: the Early Returning Agreement
// (ERA) of Herault, Bouteiller, Bosilca et al., "Practical Scalable
// Consensus for Pseudo-Synchronous Distributed Systems" (SC15; seed 001),
// as a pure state machine in the style of etcd's raft: no goroutines, no
// clock, no sockets. A node runtime, a discrete-event simulator or a test
// harness feeds a Core with Start (the procedure Agreement), Step (a
// received message) and Dead (a perfect failure detector's report) and
// carries out the returned Outs: messages to send and local decisions.
//
// Every agreement decides, besides F over the contributed values (an Op:
// BitAND as MPI_Comm_agree, BitOR, Min, Max), the union of the ranks known
// dead by the contributors, and ULFM's error flag (Decision.Unacked): whether
// some rank of that dead set had not been acknowledged by every contributor
// before the agreement. Survivors gives the agreed group of a shrink.
//
// # Files and the paper
//
//   - core.go: ERA Part 1 (the per-agreement variables Status, Current,
//     Contributed, RequestedResult, Result in type agreement; S_p in Core),
//     the procedures Agreement (Core.Start) and Decision (Core.decide),
//     Part 2 (Core.Step: recvUp, recvDown, recvRequest), Part 3 (the
//     spontaneous rule, Core.spontaneous), Part 4 (Core.Dead, discover),
//     and the garbage collection of Section 4 (Core.collect, Core.Forget).
//   - value.go: the operation F extended to the implicit parts of a value
//     (∪ of dead sets, ∩ of acknowledged sets, min of collection bounds).
//   - op.go: F itself (Op) and the built-in operations.
//   - tree.go: Parent(S, p) and Children(S, p) on trees mended by the
//     paper's Anc/Eld rule (HeapTree): binary (Figure 1b), star (Figure 1a),
//     string, k-ary, the hierarchical X/Y trees of Section 4 (bin/bin,
//     bin/star), and the tree rebalancing of Section 4 (HeapTree.Over over
//     Survivors).
//   - msg.go: the messages UP, DOWN and RESULTREQUEST (Msg), as data: their
//     versioned binary encoding is internal/wire's (AppendEraMsg,
//     DecodeEraMsg), so that era stays a pure core that imports no codec
//     (internal/wire imports era, never the reverse).
//   - resend.go: Core.Resend, which repeats the messages awaiting an answer
//     for transports that may lose messages to live processes (the paper
//     assumes reliable channels).
//
// # In the runtime
//
// detector.Core runs one Core per agreement operation (detector/agree.go),
// driven by node.Node's event loop: Node.Agree, AgreeID and Shrink call
// Start and return at the Decided Out; messages travel as wire.Agree over the node's transport
// (in memory, TCP, verbs) and go to Step; every failure the detector
// delivers goes to Dead (Part 4). The C library exposes the same as
// vigil_agree, vigil_shrink and vigil_failure_ack. RESULTS.md has the
// measurements (latency against an allreduce, failure latencies, the
// stress runs) and the commands that produce them.
//
// # Early return
//
// A process decides, and may return, as soon as its Result is set: when it
// is the root and the deciding condition holds, or when its parent's DOWN
// arrives. The Core keeps the Result and answers late UP and RESULTREQUEST
// messages until the collection bound of a later agreement says that every
// alive process has decided it.
//
// # Where this differs from the printed rules, and why
//
// The tests in scenario_test.go and the seeded schedules of
// property_test.go exercise each point.
//
//   - RESULTREQUEST carries the root's dead set S_q and the receiver adopts
//     it. The paper marks only the ranks r < q dead (q's elders). With
//     messages from a dead process still in flight, that is not enough: a
//     process answering the new root with an UP can afterwards accept the
//     stale DOWN of its dead former parent and decide a value the root never
//     learns (TestLiteralRequestRuleDisagrees). S_q contains the elders, so
//     this generalizes the printed rule.
//   - A root accepts a DOWN from any process. The printed guard
//     q = Parent(S_p, p) is never true at a root, yet the point of a root's
//     RESULTREQUEST is to learn an earlier decision, which a decided child
//     answers with DOWN; the new root would wait forever
//     (TestLiteralDownGuardHangs).
//   - Part 4: the guard "q = Parent(S_p, p)" is read with S'_p (after
//     S_p[q] ← dead it never holds), decided agreements are left alone
//     (Decision runs once and only once), and the RESULTREQUESTs to the
//     children of a dead child are sent only by a root that is not the
//     original root of the tree, as the prose says.
//   - An UP that cannot be folded in (the receiver is broadcasting), or
//     that comes from a process the receiver does not see as its child yet,
//     puts the sender in RequestedResult, so that the DOWN reaches it (the
//     prose: "it waits for the decision to be made, which will trigger the
//     answer to the requesting child").
//   - Every UP, and the root's decision, fold S_p into the dead set: so
//     every rank whose contribution is missing from a decision is in its
//     dead set. A process adopts the dead set of its decisions into S_p,
//     and ignores messages from ranks it knows dead.
//   - The paper's Anc(S, p) uses ⌊p/2^i⌋, the heap labelled from 1; ranks
//     start at 0 (Figure 1b), so ancestors are ⌊(p+1)/2^i⌋−1. Any tree is
//     handled the same way once its members are labelled in heap order.
//   - Hierarchical trees are flattened into one heap-labelled tree (node
//     leaders first), so the single Anc/Eld mending applies across levels;
//     the paper does not say how its per-level trees are mended.
//   - Garbage collection: each contribution carries the lowest Seq its
//     process has started and not decided in the epoch; F takes the
//     minimum. ULFM intersects [min, max] ranges of returned agreements; a
//     watermark is the same thing when every process starts the agreements
//     of an epoch in Seq order, which this package requires.
//
// # What is not guaranteed
//
// ERA is a non-uniform agreement (the paper's footnote 1, Theorem 2): if a
// process decides v and then fails, and every process that learnt v fails
// too, the survivors may decide another value v'. The simplest case is a
// root that decides and returns, then dies before any DOWN leaves: nobody
// alive has seen its contribution (TestNonUniformWhenRootDiesAfterDeciding).
// What holds is: a process that decides while an earlier decider is still
// alive decides the same value, dead set and flag; so all survivors agree.
package era
