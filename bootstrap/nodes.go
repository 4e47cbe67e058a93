package bootstrap

// NodeLister is a Bootstrap that knows the host of every rank, such as
// bootstrap/pmix's Client.
type NodeLister interface {
	// Nodes returns the host of every rank, indexed by rank.
	Nodes() []string
}

// Nodes returns the host of every rank of b's job, or nil when b does not
// know them.
func Nodes(b Bootstrap) []string {
	if nl, ok := b.(NodeLister); ok {
		return nl.Nodes()
	}
	return nil
}

// HostLister is a Bootstrap that tells the detector where ranks are placed
// without their being on real hosts: the local launcher's pretended hosts
// (EnvRanksPerHost), for tests of host crashes on one machine. Unlike
// Nodes, these hosts do not steer the choice of addresses.
type HostLister interface {
	// Hosts returns the host of every rank, indexed by rank (nil: none).
	Hosts() []string
}

// Hosts returns the host of every rank of b's job for the detector's
// placement (node.Config.Hosts): b's pretended hosts if it has some
// (HostLister), else its Nodes; nil when b knows neither.
func Hosts(b Bootstrap) []string {
	if hl, ok := b.(HostLister); ok {
		if h := hl.Hosts(); h != nil {
			return h
		}
	}
	return Nodes(b)
}
