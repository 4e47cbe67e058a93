// Package netaddr chooses the address a Vigil process listens on and the
// address it publishes to the other ranks, as HPC runtimes do.
//
// The settings follow Open MPI and memberlist:
//
//   - Bind is the address to listen on (memberlist's BindAddr): "ip",
//     "ip:port" or ":port"; a wildcard ip (0.0.0.0, ::) listens on every
//     interface.
//   - Advertise is the address published to the other ranks (memberlist's
//     AdvertiseAddr): "ip" or "ip:port"; without a port the listener's port
//     is published.
//   - Include and Exclude restrict the automatic choice to interfaces or
//     subnets (Open MPI's oob_tcp_if_include and oob_tcp_if_exclude): a
//     comma-separated list of interface names and CIDR prefixes, such as
//     "ib0,10.1.0.0/16".
//
// Without an explicit address, Choose picks one from the interface list:
// loopback when every rank runs on this host. When the job spans hosts it
// picks, as HPC runtimes do, the address the kernel sends from to reach
// the other ranks' hosts: ChooseFor resolves the hosts' names (as the
// launcher gives them, before any address is exchanged), asks the kernel
// for the source address of each (Routes: a connected UDP socket, nothing
// sent) and prefers the address that reaches the most hosts; with no
// route known it falls back to the first address of an up, non-loopback
// interface (IPv4 first). The lists always restrict the choice. When the
// job spans hosts a loopback or wildcard address is never published; if
// no usable address exists, Choose fails with an error naming the setting
// to change.
package netaddr
