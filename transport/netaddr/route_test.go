package netaddr

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// rt builds the routes of host to each dst, all from src.
func rt(host, src string, dsts ...string) []Route {
	var out []Route
	for _, d := range dsts {
		out = append(out, Route{Host: host, Dst: ip(d), Src: ip(src)})
	}
	return out
}

// TestChooseRoutes: across hosts, the address the routes to the other
// hosts leave from is published, whatever comes first in the interface
// list; the lists stay authoritative; without a usable route the first
// usable address is.
func TestChooseRoutes(t *testing.T) {
	// decoy comes first: the first-address rule would publish 10.78.0.1.
	decoy := Interface{Name: "dcy0", Up: true, Addrs: pfx("10.78.0.1/24")}
	bridge := Interface{Name: "eth0", Up: true, Addrs: pfx("10.79.0.1/24", "fd79::1/64")}
	hca := Interface{Name: "ib0", Up: true, Addrs: pfx("10.1.0.1/16")}
	host := []Interface{lo, decoy, bridge, hca}
	viaBridge := slices.Concat(rt("10.79.0.2", "10.79.0.1", "10.79.0.2"), rt("10.79.0.3", "10.79.0.1", "10.79.0.3"))
	self := rt("10.79.0.1", "10.79.0.1", "10.79.0.1") // this host's own name
	spans := Config{SpansHosts: true}
	for _, tc := range []struct {
		name   string
		cfg    Config
		ifaces []Interface
		routes []Route
		adv    string
		bind   string // "" : adv:0
		why    string // a part of Choice.Why
		errIn  string
	}{
		{name: "no routes: first address", cfg: spans, adv: "10.78.0.1", why: "no route to another host known"},
		{name: "route beats interface order", cfg: spans, routes: viaBridge, adv: "10.79.0.1", why: "the route to 2 of 2 other hosts"},
		{name: "own host ignored", cfg: spans, routes: slices.Concat(self, viaBridge), adv: "10.79.0.1", why: "2 of 2"},
		{name: "only own host and loopback", cfg: spans, adv: "10.78.0.1", why: "no route to another host known",
			routes: slices.Concat(self, rt("n9", "127.0.0.1", "127.0.1.1"))},
		{name: "most hosts win", cfg: spans, adv: "10.1.0.1", why: "the route to 2 of 3 other hosts",
			routes: slices.Concat(rt("a", "10.79.0.1", "10.79.0.2"), rt("b", "10.1.0.1", "10.1.0.2"), rt("c", "10.1.0.1", "10.1.0.3"))},
		{name: "a host with two addresses counts once", cfg: spans, adv: "10.1.0.1", why: "2 of 3",
			routes: slices.Concat(rt("a", "10.79.0.1", "10.79.0.2", "10.79.0.12"), rt("b", "10.1.0.1", "10.1.0.2"), rt("c", "10.1.0.1", "10.1.0.3"))},
		{name: "tie: interface order", cfg: spans, adv: "10.79.0.1",
			routes: slices.Concat(rt("a", "10.79.0.1", "10.79.0.2"), rt("b", "10.1.0.1", "10.1.0.2"))},
		{name: "IPv6 route beats IPv4 order", cfg: spans, adv: "fd79::1", routes: rt("a", "fd79::1", "fd79::2")},
		{name: "include is authoritative", cfg: Config{SpansHosts: true, Include: "ib0"}, routes: viaBridge, adv: "10.1.0.1",
			why: "no allowed address routes to the 2 other hosts"},
		{name: "exclude is authoritative", cfg: Config{SpansHosts: true, Exclude: "10.79.0.0/16,fd79::/16"}, routes: viaBridge, adv: "10.78.0.1"},
		{name: "include a subnet among routes", cfg: Config{SpansHosts: true, Include: "10.0.0.0/8"}, routes: viaBridge, adv: "10.79.0.1"},
		{name: "route from a down interface", cfg: spans, adv: "10.78.0.1",
			ifaces: []Interface{lo, decoy, {Name: "eth0", Addrs: pfx("10.79.0.1/24")}}, routes: viaBridge},
		{name: "route from loopback never published", cfg: spans, adv: "10.78.0.1", routes: rt("a", "127.0.0.1", "10.79.0.2")},
		{name: "route from a foreign address", cfg: spans, adv: "10.78.0.1", routes: rt("a", "192.0.2.1", "10.79.0.2")},
		{name: "wildcard bind", cfg: Config{SpansHosts: true, Bind: "0.0.0.0:7000"}, routes: viaBridge, adv: "10.79.0.1", bind: "0.0.0.0:7000"},
		{name: "advertise wins", cfg: Config{SpansHosts: true, Advertise: "10.78.0.1"}, routes: viaBridge, adv: "10.78.0.1", why: "set by Advertise"},
		{name: "bind wins", cfg: Config{SpansHosts: true, Bind: "10.1.0.1"}, routes: viaBridge, adv: "10.1.0.1", why: "set by Bind"},
		{name: "one host: routes ignored", routes: viaBridge, adv: "127.0.0.1", why: "every rank runs on this host"},
		{name: "nothing usable", cfg: spans, ifaces: []Interface{lo}, routes: rt("a", "127.0.0.1", "10.79.0.2"), errIn: "Include"},
		{name: "nothing allowed", cfg: Config{SpansHosts: true, Include: "ib9", Names: Names{Include: "-if-include"}},
			routes: viaBridge, errIn: "-if-include"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ifaces := tc.ifaces
			if ifaces == nil {
				ifaces = host
			}
			c, err := Choose(tc.cfg, ifaces, tc.routes...)
			if tc.errIn != "" {
				var e *Error
				if !errors.As(err, &e) || e.Setting != tc.errIn {
					t.Fatalf("Choose: got %+v, %v; want an error naming %s", c, err, tc.errIn)
				}
				return
			}
			if err != nil {
				t.Fatalf("Choose: %v", err)
			}
			bind := tc.bind
			if bind == "" {
				bind = netip.AddrPortFrom(ip(tc.adv), 0).String()
			}
			if c.Advertise != ip(tc.adv) || c.Bind != bind || !strings.Contains(c.Why, tc.why) {
				t.Fatalf("Choose = advertise %s, bind %s (%s); want %s, %s (%s)", c.Advertise, c.Bind, c.Why, tc.adv, bind, tc.why)
			}
		})
	}
}

// TestRoutes: IP addresses are taken as they are, names resolved (up to a
// "/"); a name that does not resolve, an address without a route, a
// link-local or wildcard address and empty names are left out; each host
// once.
func TestRoutes(t *testing.T) {
	names := map[string][]netip.Addr{
		"n1": {ip("10.79.0.1")},
		"n2": {ip("10.79.0.2"), ip("fd79::2"), ip("fe80::2")},
		"n3": {ip("::ffff:10.79.0.3")},
		"n4": {ip("0.0.0.0")},
	}
	lookup := func(_ context.Context, h string) ([]netip.Addr, error) {
		if a, ok := names[h]; ok {
			return a, nil
		}
		return nil, fmt.Errorf("%s: no such host", h)
	}
	routeTo := func(dst netip.Addr) (netip.Addr, error) {
		switch {
		case dst.Is6():
			return ip("fd79::1"), nil
		case dst == ip("10.9.9.9"):
			return netip.Addr{}, errors.New("network is unreachable")
		}
		return ip("10.79.0.1"), nil
	}
	got := routes(context.Background(), []string{"n1", "n1", "", "n2", "n2", "nx", "10.9.9.9", "10.79.0.5", "n3", "n4", "n3/net:[4026531840]"}, lookup, routeTo)
	want := []Route{
		{"n1", ip("10.79.0.1"), ip("10.79.0.1")},
		{"n2", ip("10.79.0.2"), ip("10.79.0.1")},
		{"n2", ip("fd79::2"), ip("fd79::1")},
		{"10.79.0.5", ip("10.79.0.5"), ip("10.79.0.1")},
		{"n3", ip("10.79.0.3"), ip("10.79.0.1")},
		{"n3/net:[4026531840]", ip("10.79.0.3"), ip("10.79.0.1")},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("routes = %v\nwant %v", got, want)
	}
}

func TestSampleHosts(t *testing.T) {
	var nodes []string
	for i := range 20 {
		nodes = append(nodes, fmt.Sprintf("n%d", i), fmt.Sprintf("n%d", i)) // 2 ranks per host
	}
	for _, tc := range []struct {
		nodes []string
		limit int
		want  []string
	}{
		{nil, 8, nil},
		{[]string{"", "a", "b", "a", ""}, 8, []string{"a", "b"}},
		{nodes, 4, []string{"n0", "n5", "n10", "n15"}},
		{nodes[:6], 3, []string{"n0", "n1", "n2"}},
	} {
		if got := sampleHosts(tc.nodes, tc.limit); !slices.Equal(got, tc.want) {
			t.Errorf("sampleHosts(%q, %d) = %q, want %q", tc.nodes, tc.limit, got, tc.want)
		}
	}
}

// TestRouteTo asks this host's kernel: loopback is reached from loopback;
// a name that resolves nowhere gives no route.
func TestRouteTo(t *testing.T) {
	if src, err := RouteTo(ip("127.0.0.1")); err != nil || src != ip("127.0.0.1") {
		t.Fatalf("RouteTo(127.0.0.1) = %v, %v", src, err)
	}
	if rs := Routes(context.Background(), []string{"127.0.0.1", "no-such-host.invalid"}); len(rs) != 1 ||
		rs[0] != (Route{"127.0.0.1", ip("127.0.0.1"), ip("127.0.0.1")}) {
		t.Fatalf("Routes = %v", rs)
	}
}
