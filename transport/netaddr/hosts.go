package netaddr

// SpansHosts reports whether nodes, the host of every rank as a launcher
// gives it (such as bootstrap/pmix's Client.Nodes), names more than one
// host. An empty list, or one with an unknown ("") entry only, is one host.
func SpansHosts(nodes []string) bool {
	first := ""
	for _, n := range nodes {
		switch {
		case n == "":
		case first == "":
			first = n
		case n != first:
			return true
		}
	}
	return false
}
