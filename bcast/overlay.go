package bcast

import "github.com/vigil-hpc/vigil/ranks"

// Overlay is a broadcast algorithm's forwarding rule.
type Overlay interface {
	// Name is the algorithm's short name ("hba", "bmg").
	Name() string
	// Neighbors returns, in sending order, the ranks to which rank self
	// forwards a broadcast started by source among the participants
	// A = {0..n-1} \ D. self and source must be in A. The result never
	// contains self, holds no duplicates, and depends only on the arguments.
	Neighbors(self, source ranks.Rank, n int, D *ranks.Set) []ranks.Rank
}
