// Package bcast holds Vigil's failure-propagation cores: reliable broadcasts
// of "rank r has died" (or "rank r has left") to every alive rank.
//
// Every algorithm is an Overlay: a pure function that says to whom a node
// forwards a broadcast, given the source and the dead list D carried in the
// message. The Broadcaster is the pure state machine shared by all overlays:
// it stamps new broadcasts with a unique ID, suppresses duplicates and
// computes the forwarding list on the first reception (task T5 of seed 000's
// Algorithm 1, the Forwarding procedure of seed 003's Algorithm 1).
//
// Overlays:
//   - HBA, the double hypercube broadcast of seed 000 §2: the alive set
//     A = {0..N-1} \ D is labelled relative to the source, and two hypercube
//     broadcasts over 2^k nodes (k = ⌊log2 |A|⌋) cover it.
//   - BMG, the binomial-graph broadcast of seed 003 Algorithm 1: ±2^j
//     neighbours, forward once, binomial spanning-tree messages first. Unlike
//     the seed (raw ranks mod N), it labels the same alive set A as HBA
//     relative to the source, so cumulative failures do not erode it.
//
// Both tolerate up to k−1 participants (other than the source) failing during
// a broadcast: every alive participant still receives it exactly once.
//
// Seed 002's corrected gossips are Gossip, a Propagator like the
// Broadcaster but timed (Tick, Next): a random gossip (or, with
// GossipConfig.Tree, the greedy LogP tree of GreedyTree: the corrected
// tree) until step T, then the ring correction of OCG, CCG or FCG
// (CorrNode, the algorithms' per-node state machine, which the simulator
// drives too). T and OCG's C come from the paper's equations (3)–(5)
// (GossipModel). Message.Hop carries what each copy adds: its phase, its
// sender's step and FCG's known g-nodes.
//
// Propagator is what a driver (detector.Core) holds: Begin, Step, Tick,
// Next.
//
// The cores never read a clock, never block and never touch a socket; the
// node runtime, the simulator and the tests drive them.
package bcast
