package netaddr

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Route is the local address this host's kernel sends from to reach one
// address of another rank's host: an input of Choose, so that tests can
// pass any routing table.
type Route struct {
	Host string     // the host, as the launcher names it
	Dst  netip.Addr // one of its addresses
	Src  netip.Addr // the source address the kernel picks for Dst
}

// Defaults of Routes.
const (
	// MaxRouteHosts is how many of the job's hosts Routes resolves and
	// routes to at most: a sample spread over the node list is enough to
	// tell which network joins the hosts.
	MaxRouteHosts = 8
	// RouteTimeout bounds Routes' name resolution.
	RouteTimeout = 2 * time.Second
)

// RouteTo returns the source address the kernel would use to send to dst:
// a UDP socket connected to dst (which sends nothing) and its local
// address. It fails when no route leads to dst.
func RouteTo(dst netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// Routes resolves the hosts of nodes (the host of every rank; IP
// addresses are taken as they are, names, up to a "/", are looked up in
// the system's resolver within RouteTimeout) and returns the route to each of their
// addresses (RouteTo). At most MaxRouteHosts distinct hosts are taken,
// spread evenly over the list; hosts that do not resolve and addresses
// with no route are left out. This host's own name may be among them:
// Choose ignores routes to this host's own addresses.
func Routes(ctx context.Context, nodes []string) []Route {
	ctx, cancel := context.WithTimeout(ctx, RouteTimeout)
	defer cancel()
	lookup := func(ctx context.Context, host string) ([]netip.Addr, error) {
		return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	return routes(ctx, nodes, lookup, RouteTo)
}

// routes is Routes with the resolver and the routing table as arguments.
func routes(ctx context.Context, nodes []string, lookup func(context.Context, string) ([]netip.Addr, error),
	routeTo func(netip.Addr) (netip.Addr, error)) []Route {
	hosts := sampleHosts(nodes, MaxRouteHosts)
	found := make([][]Route, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name, _, _ := strings.Cut(h, "/") // libvigil's allgather names hosts "name/netns"
			var addrs []netip.Addr
			if ip, err := netip.ParseAddr(name); err == nil {
				addrs = []netip.Addr{ip}
			} else if addrs, err = lookup(ctx, name); err != nil {
				return
			}
			for _, a := range addrs {
				a = a.Unmap()
				if !usable(a) || a.Zone() != "" {
					continue
				}
				if src, err := routeTo(a); err == nil && src.IsValid() {
					found[i] = append(found[i], Route{Host: h, Dst: a, Src: src.Unmap()})
				}
			}
		}()
	}
	wg.Wait()
	return slices.Concat(found...)
}

// sampleHosts returns the distinct non-empty names of nodes in order of
// first appearance, or limit of them spread evenly over that order.
func sampleHosts(nodes []string, limit int) []string {
	var distinct []string
	seen := map[string]bool{}
	for _, n := range nodes {
		if n != "" && !seen[n] {
			seen[n] = true
			distinct = append(distinct, n)
		}
	}
	if len(distinct) <= limit {
		return distinct
	}
	out := make([]string, limit)
	for i := range out {
		out[i] = distinct[i*len(distinct)/limit]
	}
	return out
}
