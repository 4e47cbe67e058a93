package netaddr

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Config holds the address settings as the user gave them. Empty fields
// are unset.
type Config struct {
	// Bind is the address to listen on: "ip", "ip:port" or ":port". An
	// empty or wildcard ip leaves the published address to Advertise or
	// to the automatic choice; an empty ip listens on the published one.
	Bind string
	// Advertise is the address published to the other ranks: "ip" or
	// "ip:port" (default port: the listener's).
	Advertise string
	// Include and Exclude are ParseList lists restricting the automatic
	// choice; explicit Bind and Advertise addresses are used as given.
	Include, Exclude string
	// SpansHosts says that the job's ranks run on more than one host
	// (SpansHosts of the launcher's node list).
	SpansHosts bool
	// Names are the settings' names in errors, such as "-bind" or
	// "VIGIL_BIND"; empty names default to the field names.
	Names Names
}

// Names are the user-facing names of Config's settings.
type Names struct {
	Bind, Advertise, Include, Exclude string
}

func (n Names) withDefaults() Names {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&n.Bind, "Bind")
	def(&n.Advertise, "Advertise")
	def(&n.Include, "Include")
	def(&n.Exclude, "Exclude")
	return n
}

// Error is a setting that cannot be used, or no usable address.
type Error struct {
	Setting string // the setting to change, such as "-if-include"
	Problem string
}

// Error formats the failure as "netaddr: Setting: Problem".
func (e *Error) Error() string { return "netaddr: " + e.Setting + ": " + e.Problem }

func errorf(setting, format string, args ...any) error {
	return &Error{Setting: setting, Problem: fmt.Sprintf(format, args...)}
}

// settings is a parsed Config.
type settings struct {
	bind, adv         netip.Addr
	bindPort, advPort uint16
	inc, exc          List
	names             Names
}

func (cfg Config) parse() (settings, error) {
	s := settings{names: cfg.Names.withDefaults()}
	n := s.names
	var err error
	if s.bind, s.bindPort, err = parseAddr(cfg.Bind, true); err != nil {
		return s, errorf(n.Bind, "%v", err)
	}
	if s.adv, s.advPort, err = parseAddr(cfg.Advertise, false); err != nil {
		return s, errorf(n.Advertise, "%v", err)
	}
	if s.adv.IsUnspecified() {
		return s, errorf(n.Advertise, "%s is a wildcard address: the other ranks cannot reach it", s.adv)
	}
	if s.inc, err = ParseList(cfg.Include); err != nil {
		return s, errorf(n.Include, "%v", err)
	}
	if s.exc, err = ParseList(cfg.Exclude); err != nil {
		return s, errorf(n.Exclude, "%v", err)
	}
	return s, nil
}

// Validate checks the settings without the interface list (their syntax,
// and that Advertise is not a wildcard), naming the first bad one.
func (cfg Config) Validate() error {
	_, err := cfg.parse()
	return err
}

// parseAddr parses "ip", "ip:port", "[ip]:port" or, if portOnly, ":port";
// "" gives an invalid address and port 0.
func parseAddr(s string, portOnly bool) (netip.Addr, uint16, error) {
	if s == "" {
		return netip.Addr{}, 0, nil
	}
	if ip, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return checkZone(ip, s)
	}
	h, ps, err := net.SplitHostPort(s)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("%q is not ip, ip:port or [ipv6]:port", s)
	}
	p, err := strconv.ParseUint(ps, 10, 16)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("%q: port %q is not a number below 65536", s, ps)
	}
	if h == "" {
		if !portOnly {
			return netip.Addr{}, 0, fmt.Errorf("%q has no address", s)
		}
		return netip.Addr{}, uint16(p), nil
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("%q: %q is not an IP address", s, h)
	}
	ip, _, err = checkZone(ip, s)
	return ip, uint16(p), err
}

func checkZone(ip netip.Addr, s string) (netip.Addr, uint16, error) {
	if ip.Zone() != "" {
		return netip.Addr{}, 0, fmt.Errorf("%q: addresses with a zone (link-local) cannot be published", s)
	}
	return ip.Unmap(), 0, nil
}
