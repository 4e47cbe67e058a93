package sim

import "github.com/vigil-hpc/vigil/bcast"

// DeltaConsistency is seed 002's δ (bcast.DeltaConsistency).
const DeltaConsistency = bcast.DeltaConsistency

// GossipModel is seed 002's analytical model of the gossip phase
// (bcast.GossipModel): the runtime picks T and C with the same formulas.
type GossipModel = bcast.GossipModel

// GossipPlan is one algorithm's parameter choice (bcast.GossipPlan).
type GossipPlan = bcast.GossipPlan
