package daemon

import (
	"fmt"

	"github.com/vigil-hpc/vigil/ranks"
)

// Layout maps the application's process ranks to nodes (daemons): seed
// 003's Hosted{D}, "obtained from the environment". Ranks are placed by
// block, PPN per node: node d hosts ranks d·PPN … d·PPN+PPN−1, as mpirun
// --map-by ppr:PPN:node places them.
type Layout struct {
	// Nodes is N, the number of daemons; PPN the processes per node
	// (0: daemons only, no application processes).
	Nodes, PPN int
}

// Validate reports the first bad field.
func (l Layout) Validate() error {
	switch {
	case l.Nodes < 1:
		return fmt.Errorf("daemon: Layout.Nodes = %d, want ≥ 1", l.Nodes)
	case l.PPN < 0:
		return fmt.Errorf("daemon: Layout.PPN = %d, want ≥ 0", l.PPN)
	case int64(l.Nodes)*int64(l.PPN) > 1<<31:
		return fmt.Errorf("daemon: Layout %d nodes × %d processes is too many ranks", l.Nodes, l.PPN)
	}
	return nil
}

// Procs returns the number of application ranks.
func (l Layout) Procs() int { return l.Nodes * l.PPN }

// NodeOf returns the node hosting rank r, false if r is not a rank.
func (l Layout) NodeOf(r ranks.Rank) (ranks.Rank, bool) {
	if l.PPN == 0 || int64(r) >= int64(l.Procs()) {
		return 0, false
	}
	return r / ranks.Rank(l.PPN), true
}

// Hosted returns the ranks node d hosts, in increasing order.
func (l Layout) Hosted(d ranks.Rank) []ranks.Rank {
	if int64(d) >= int64(l.Nodes) {
		return nil
	}
	out := make([]ranks.Rank, l.PPN)
	for i := range out {
		out[i] = d*ranks.Rank(l.PPN) + ranks.Rank(i)
	}
	return out
}
