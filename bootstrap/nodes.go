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
