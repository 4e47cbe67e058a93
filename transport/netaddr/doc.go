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
// loopback when every rank runs on this host, and otherwise the first
// address of an up, non-loopback interface that the lists allow. When the
// job spans hosts a loopback or wildcard address is never published; if
// no usable address exists, Choose fails with an error naming the setting
// to change.
package netaddr
