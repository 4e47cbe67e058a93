// Package sim is Vigil's discrete-event simulator: it drives the unmodified
// protocol cores (detector.Core, the shipped failure detector, in
// Detector; bcast.Broadcaster with its overlays; bcast.Gossip, the
// corrected gossips and trees, in GossipSim; era.Core) in virtual time
// to reproduce the papers' results at 4,096 to 256,000 nodes. Each
// simulated rank's Core is driven as the node runtime drives it: the
// simulated heartbeat thread's checks (watch.go, the C check in Go) make
// the records that enter suspicion through detector.Core.Observe, and the
// driver wakes at Core.NextWake, at the checks' alarm and after each
// message (observe.go).
package sim
