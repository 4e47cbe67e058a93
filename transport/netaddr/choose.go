package netaddr

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Choice is the outcome of Choose.
type Choice struct {
	// Bind is the "host:port" to listen on (port 0: any).
	Bind string
	// Advertise is the address published to the other ranks.
	Advertise netip.Addr
	// AdvertisePort, when not 0, is published instead of the listener's
	// port.
	AdvertisePort uint16
	// Why says how Advertise was chosen, for logs.
	Why string
}

// Publish returns the address to publish for a listener bound to
// listenAddr ("host:port", as net.Listener.Addr formats it): Advertise
// with the listener's port, or with AdvertisePort.
func (c Choice) Publish(listenAddr string) (string, error) {
	port := c.AdvertisePort
	if port == 0 {
		_, ps, err := net.SplitHostPort(listenAddr)
		if err != nil {
			return "", fmt.Errorf("netaddr: listener address %q: %w", listenAddr, err)
		}
		p, err := strconv.ParseUint(ps, 10, 16)
		if err != nil || p == 0 {
			return "", fmt.Errorf("netaddr: listener address %q has no port", listenAddr)
		}
		port = uint16(p)
	}
	return netip.AddrPortFrom(c.Advertise, port).String(), nil
}

// Choose applies cfg to the interface list ifaces (Interfaces on a real
// host) and to routes, the routes to the other ranks' hosts (Routes; none
// when unknown), and returns the addresses to listen on and to publish:
//
//   - Advertise, when set, is published; it must not be a wildcard, nor
//     loopback when the job spans hosts.
//   - Otherwise a specific Bind address is published; it must not be
//     loopback when the job spans hosts.
//   - Otherwise (no address, or a wildcard Bind) an address is picked from
//     ifaces: only up interfaces, only addresses that Include (when set)
//     lists and Exclude does not, never link-local ones; a loopback one
//     first when the job runs on this host alone, none at all when it
//     spans hosts. Across hosts, the address the kernel sends from to the
//     most other hosts (routes; routes to this host's own addresses are
//     ignored) comes first; then IPv4 before IPv6, then interface order.
//
// The listener binds the Bind address when one is given (a wildcard
// included), or else the published address, or every interface when the
// published address is not one of ifaces'.
func Choose(cfg Config, ifaces []Interface, routes ...Route) (Choice, error) {
	s, err := cfg.parse()
	if err != nil {
		return Choice{}, err
	}
	bind, adv, n := s.bind, s.adv, s.names
	c := Choice{AdvertisePort: s.advPort}
	switch {
	case adv.IsValid():
		if cfg.SpansHosts && adv.IsLoopback() {
			return Choice{}, errorf(n.Advertise, "%s is a loopback address, but the job's ranks run on several hosts", adv)
		}
		c.Advertise, c.Why = adv, "set by "+n.Advertise
	case bind.IsValid() && !bind.IsUnspecified():
		if cfg.SpansHosts && bind.IsLoopback() {
			return Choice{}, errorf(n.Bind, "%s is a loopback address, but the job's ranks run on several hosts (set %s to listen here and publish another address)", bind, n.Advertise)
		}
		c.Advertise, c.Why = bind, "set by "+n.Bind
	default:
		if c.Advertise, c.Why, err = pick(ifaces, routes, s.inc, s.exc, cfg.SpansHosts, n); err != nil {
			return Choice{}, err
		}
	}
	host := bind
	if !host.IsValid() {
		host = c.Advertise
		if !local(ifaces, host) {
			// An advertised address that is not this host's (a NAT or
			// forwarding address): listen on every interface.
			host = netip.IPv4Unspecified()
			if c.Advertise.Is6() {
				host = netip.IPv6Unspecified()
			}
		}
	}
	c.Bind = netip.AddrPortFrom(host, s.bindPort).String()
	return c, nil
}

// automatic reports whether Choose picks the published address from the
// interfaces (and routes) rather than taking it from the settings.
func (s settings) automatic() bool {
	return !s.adv.IsValid() && (!s.bind.IsValid() || s.bind.IsUnspecified())
}

// usable reports whether ip may be published: not a wildcard, multicast
// or link-local address (a link-local one needs a zone the other hosts do
// not share).
func usable(ip netip.Addr) bool {
	return ip.IsValid() && !ip.IsUnspecified() && !ip.IsMulticast() &&
		!ip.IsLinkLocalUnicast() && !ip.IsInterfaceLocalMulticast()
}

// reach counts, for each source address of routes, the other hosts it
// reaches (routes to loopback or to an address of ifaces lead to this
// host), and returns how many other hosts routes name.
func reach(ifaces []Interface, routes []Route) (map[netip.Addr]int, int) {
	hosts := map[string]map[netip.Addr]bool{} // host → sources reaching it
	for _, r := range routes {
		dst := r.Dst.Unmap()
		if !dst.IsValid() || dst.IsLoopback() || dst.IsUnspecified() || local(ifaces, dst) {
			continue
		}
		if hosts[r.Host] == nil {
			hosts[r.Host] = map[netip.Addr]bool{}
		}
		if r.Src.IsValid() {
			hosts[r.Host][r.Src.Unmap()] = true
		}
	}
	count := map[netip.Addr]int{}
	for _, srcs := range hosts {
		for src := range srcs {
			count[src]++
		}
	}
	return count, len(hosts)
}

// pick is the automatic choice of Choose; it returns the address and why.
func pick(ifaces []Interface, routes []Route, inc, exc List, spans bool, n Names) (netip.Addr, string, error) {
	var count map[netip.Addr]int
	others := 0
	if spans {
		count, others = reach(ifaces, routes)
	}
	var best netip.Addr
	rank := func(ip netip.Addr, loop bool) int { // lower is better
		r := 0
		if !ip.Is4() {
			r++
		}
		if !spans && !loop {
			r += 2
		}
		return r - 4*count[ip]
	}
	bestRank := 1 << 30
	for _, ifc := range ifaces {
		if !ifc.Up {
			continue
		}
		for _, p := range ifc.Addrs {
			ip := p.Addr().Unmap()
			loop := ifc.Loopback || ip.IsLoopback()
			switch {
			case !usable(ip), spans && loop:
				continue
			case !inc.Empty() && !inc.Match(ifc.Name, ip), exc.Match(ifc.Name, ip):
				continue
			}
			if r := rank(ip, loop); r < bestRank {
				best, bestRank = ip, r
			}
		}
	}
	if best.IsValid() {
		var why string
		switch k := count[best]; {
		case !spans:
			why = "every rank runs on this host"
		case k > 0:
			why = fmt.Sprintf("the route to %d of %d other hosts", k, others)
		case others > 0:
			why = fmt.Sprintf("the first usable address: no allowed address routes to the %d other hosts", others)
		default:
			why = "the first usable address: no route to another host known"
		}
		return best, why, nil
	}
	what := "no up interface has a usable address"
	if !inc.Empty() {
		what = fmt.Sprintf("no up interface has a usable address matching %s=%s", n.Include, inc)
	}
	if !exc.Empty() {
		what += fmt.Sprintf(" outside %s=%s", n.Exclude, exc)
	}
	if spans {
		what += " other than loopback, which is never published when the job's ranks run on several hosts"
	}
	return netip.Addr{}, "", errorf(n.Include, "%s (interfaces: %s); set %s to the interface or subnet of the network joining the hosts, or %s",
		what, describe(ifaces), n.Include, n.Advertise)
}

// local reports whether ip is an address of one of ifaces.
func local(ifaces []Interface, ip netip.Addr) bool {
	for _, ifc := range ifaces {
		for _, p := range ifc.Addrs {
			if p.Addr().Unmap() == ip {
				return true
			}
		}
	}
	return false
}

func describe(ifaces []Interface) string {
	if len(ifaces) == 0 {
		return "none"
	}
	s := make([]string, len(ifaces))
	for i, ifc := range ifaces {
		s[i] = ifc.String()
	}
	return strings.Join(s, "; ")
}

// ChooseFor is Choose on this machine's interfaces for a job whose ranks
// run on nodes (the host of every rank, as bootstrap.Nodes gives it; nil
// when unknown): cfg.SpansHosts is set from nodes and, when the job spans
// hosts and the address is to be picked automatically, the routes to the
// hosts of nodes are looked up (Routes, within RouteTimeout).
func ChooseFor(cfg Config, nodes []string) (Choice, error) {
	ifs, err := Interfaces()
	if err != nil {
		return Choice{}, err
	}
	cfg.SpansHosts = SpansHosts(nodes)
	var rs []Route
	if s, err := cfg.parse(); err == nil && cfg.SpansHosts && s.automatic() {
		rs = Routes(context.Background(), nodes)
	}
	return Choose(cfg, ifs, rs...)
}

// Publishing wraps exchange, a job's address exchange, so that it publishes
// c's address for the listener's (Publish); what it published is stored in
// *published when published is not nil.
func (c Choice) Publishing(exchange func(context.Context, string) ([]string, error), published *string) func(context.Context, string) ([]string, error) {
	return func(ctx context.Context, listenAddr string) ([]string, error) {
		pub, err := c.Publish(listenAddr)
		if err != nil {
			return nil, err
		}
		if published != nil {
			*published = pub
		}
		return exchange(ctx, pub)
	}
}
