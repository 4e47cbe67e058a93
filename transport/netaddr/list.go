package netaddr

import (
	"fmt"
	"net/netip"
	"strings"
)

// maxIfName is the longest interface name Linux accepts (IFNAMSIZ − 1).
const maxIfName = 15

// List is an interface include or exclude list: interface names and
// subnets. The zero List is empty and matches nothing.
type List struct {
	names   []string
	subnets []netip.Prefix
}

// ParseList parses a comma-separated list of interface names ("eth0",
// "ib0"), CIDR prefixes ("10.1.0.0/16", "fd00::/8") and single addresses
// ("10.1.2.3", taken as a /32 or /128), as Open MPI's oob_tcp_if_include
// takes them. Spaces around entries and empty entries are ignored.
func ParseList(s string) (List, error) {
	var l List
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return List{}, fmt.Errorf("%q is not a CIDR prefix such as 10.1.0.0/16", e)
			}
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			l.subnets = append(l.subnets, p.Masked())
		default:
			if ip, err := netip.ParseAddr(e); err == nil {
				if ip.Zone() != "" {
					return List{}, fmt.Errorf("%q: an address with a zone cannot be matched", e)
				}
				l.subnets = append(l.subnets, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
				continue
			}
			if err := checkIfName(e); err != nil {
				return List{}, err
			}
			l.names = append(l.names, e)
		}
	}
	return l, nil
}

// checkIfName accepts what Linux accepts as an interface name.
func checkIfName(s string) error {
	if len(s) > maxIfName {
		return fmt.Errorf("%q is neither an address nor an interface name (at most %d bytes)", s, maxIfName)
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c == ':' || c == '/' || c >= 0x7f {
			return fmt.Errorf("%q is neither an address nor an interface name", s)
		}
	}
	return nil
}

// Empty reports whether the list has no entries.
func (l List) Empty() bool { return len(l.names) == 0 && len(l.subnets) == 0 }

// Match reports whether the list names interface ifname or holds a subnet
// containing ip.
func (l List) Match(ifname string, ip netip.Addr) bool {
	for _, n := range l.names {
		if n == ifname {
			return true
		}
	}
	ip = ip.Unmap().WithZone("")
	for _, p := range l.subnets {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// String formats the list as ParseList reads it: names, then subnets.
func (l List) String() string {
	parts := append([]string(nil), l.names...)
	for _, p := range l.subnets {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ",")
}
