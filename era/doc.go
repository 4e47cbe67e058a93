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
// before the agreement. Survivors gives the agreed group of a shrink. A
// process decides, and may return, as soon as its Result is set; the Core
// keeps the Result and answers late requests until a later agreement's
// collection bound says every alive process has decided it.
//
// Files: core.go (Parts 1–4 and the garbage collection of the paper's
// Section 4), value.go and op.go (the operation F), tree.go (trees mended
// by the paper's Anc/Eld rule: binary, star, string, k-ary, hierarchical),
// msg.go (the messages UP, DOWN and RESULTREQUEST, as data: their encoding
// is internal/wire's), resend.go (repeats for transports that may lose
// messages). detector.Core runs one Core per agreement operation
// (detector/agree.go).
//
// ERA is a non-uniform agreement: if a process decides and fails, and
// every process that learnt its decision fails too, the survivors may
// decide another value; all survivors agree. Where this implementation
// departs from the paper's printed rules, and why (each point exercised by
// scenario_test.go and property_test.go): docs/era.md. Measurements:
// RESULTS.md.
package era
