package netaddr

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Interface is one network interface and its addresses: the input of
// Choose, so that tests can pass any machine's list.
type Interface struct {
	Name     string
	Up       bool // administratively up (IFF_UP)
	Loopback bool // IFF_LOOPBACK
	Addrs    []netip.Prefix
}

// String formats the interface as "name [down] addr/len ...".
func (i Interface) String() string {
	var b strings.Builder
	b.WriteString(i.Name)
	if !i.Up {
		b.WriteString(" (down)")
	}
	for _, a := range i.Addrs {
		b.WriteByte(' ')
		b.WriteString(a.String())
	}
	return b.String()
}

// Interfaces returns this host's interfaces, in index order, as
// net.Interfaces reports them.
func Interfaces() ([]Interface, error) {
	nifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("netaddr: listing interfaces: %w", err)
	}
	out := make([]Interface, 0, len(nifs))
	for _, ni := range nifs {
		addrs, err := ni.Addrs()
		if err != nil {
			return nil, fmt.Errorf("netaddr: addresses of %s: %w", ni.Name, err)
		}
		ifc := Interface{Name: ni.Name, Up: ni.Flags&net.FlagUp != 0, Loopback: ni.Flags&net.FlagLoopback != 0}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			ones, _ := n.Mask.Size()
			ip = ip.Unmap()
			if ip.Is4() && ones > 32 {
				ones -= 96
			}
			ifc.Addrs = append(ifc.Addrs, netip.PrefixFrom(ip, ones))
		}
		out = append(out, ifc)
	}
	return out, nil
}
