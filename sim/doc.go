// Package sim is Vigil's discrete-event simulator: it drives the unmodified
// protocol cores (detector.Core, the shipped failure detector, in
// Detector; bcast.Broadcaster with its overlays; bcast.Gossip, the
// corrected gossips and trees, in GossipSim; era.Core) in virtual time
// to reproduce the papers' results at 4,096 to 256,000 nodes.
package sim
