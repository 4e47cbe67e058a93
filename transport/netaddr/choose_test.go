package netaddr

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func pfx(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

var (
	lo      = Interface{Name: "lo", Up: true, Loopback: true, Addrs: pfx("127.0.0.1/8", "::1/128")}
	eth0    = Interface{Name: "eth0", Up: true, Addrs: pfx("fe80::1/64", "192.0.2.10/24")}
	ib0     = Interface{Name: "ib0", Up: true, Addrs: pfx("fd00::5/64", "10.1.0.5/16")}
	eth1    = Interface{Name: "eth1", Addrs: pfx("172.16.0.1/24")} // down
	cluster = []Interface{lo, eth0, ib0, eth1}
)

func TestChoose(t *testing.T) {
	v6only := []Interface{{Name: "lo", Up: true, Loopback: true, Addrs: pfx("::1/128")},
		{Name: "eth0", Up: true, Addrs: pfx("fe80::2/64", "fd00::2/64")}}
	linkLocal := []Interface{lo, {Name: "eth0", Up: true, Addrs: pfx("fe80::2/64", "169.254.3.4/16")}}
	for _, tc := range []struct {
		name   string
		cfg    Config
		ifaces []Interface
		bind   string
		adv    string
		port   uint16 // AdvertisePort
		errIn  string // the setting named by the error ("" : no error)
		errHas string
	}{
		{name: "one host: loopback", bind: "127.0.0.1:0", adv: "127.0.0.1"},
		{name: "one host, only IPv6 loopback", ifaces: []Interface{{Name: "lo", Up: true, Loopback: true, Addrs: pfx("::1/128")}, eth0},
			bind: "[::1]:0", adv: "::1"},
		{name: "hosts: first non-loopback up IPv4", cfg: Config{SpansHosts: true}, bind: "192.0.2.10:0", adv: "192.0.2.10"},
		{name: "hosts: include by name", cfg: Config{SpansHosts: true, Include: "ib0"}, bind: "10.1.0.5:0", adv: "10.1.0.5"},
		{name: "hosts: include by subnet", cfg: Config{SpansHosts: true, Include: "10.1.0.0/16"}, bind: "10.1.0.5:0", adv: "10.1.0.5"},
		{name: "hosts: include IPv6 subnet", cfg: Config{SpansHosts: true, Include: "fd00::/8"}, bind: "[fd00::5]:0", adv: "fd00::5"},
		{name: "hosts: include a single address", cfg: Config{SpansHosts: true, Include: " 10.1.0.5 "}, bind: "10.1.0.5:0", adv: "10.1.0.5"},
		{name: "hosts: exclude", cfg: Config{SpansHosts: true, Exclude: "eth0"}, bind: "10.1.0.5:0", adv: "10.1.0.5"},
		{name: "hosts: exclude subnet", cfg: Config{SpansHosts: true, Exclude: "192.0.2.0/24"}, bind: "10.1.0.5:0", adv: "10.1.0.5"},
		{name: "hosts: include and exclude", cfg: Config{SpansHosts: true, Include: "eth0,ib0", Exclude: "192.0.2.0/24,fd00::/8"},
			bind: "10.1.0.5:0", adv: "10.1.0.5"},
		{name: "hosts: everything excluded", cfg: Config{SpansHosts: true, Exclude: "eth0,ib0"},
			errIn: "Include", errHas: "outside Exclude=eth0,ib0"},
		{name: "hosts: included interface down", cfg: Config{SpansHosts: true, Include: "eth1"},
			errIn: "Include", errHas: "matching Include=eth1 other than loopback"},
		{name: "hosts: included loopback", cfg: Config{SpansHosts: true, Include: "lo"}, errIn: "Include"},
		{name: "hosts: loopback only", cfg: Config{SpansHosts: true}, ifaces: []Interface{lo, eth1},
			errIn: "Include", errHas: "usable address other than loopback, which is never published when the job's ranks run on several hosts"},
		{name: "hosts: link-local only", cfg: Config{SpansHosts: true}, ifaces: linkLocal, errIn: "Include"},
		{name: "hosts: no interfaces", cfg: Config{SpansHosts: true}, ifaces: []Interface{}, errIn: "Include", errHas: "interfaces: none"},
		{name: "hosts: IPv6 only", cfg: Config{SpansHosts: true}, ifaces: v6only, bind: "[fd00::2]:0", adv: "fd00::2"},
		{name: "one host: include", cfg: Config{Include: "eth0"}, bind: "192.0.2.10:0", adv: "192.0.2.10"},
		{name: "one host: exclude loopback", cfg: Config{Exclude: "lo"}, bind: "192.0.2.10:0", adv: "192.0.2.10"},
		{name: "bind ip:port", cfg: Config{SpansHosts: true, Bind: "10.1.0.5:7000"}, bind: "10.1.0.5:7000", adv: "10.1.0.5"},
		{name: "bind wins over include", cfg: Config{SpansHosts: true, Bind: "10.1.0.5", Include: "eth0"}, bind: "10.1.0.5:0", adv: "10.1.0.5"},
		{name: "bind loopback across hosts", cfg: Config{SpansHosts: true, Bind: "127.0.0.1"}, errIn: "Bind", errHas: "loopback"},
		{name: "bind loopback on one host", cfg: Config{Bind: "127.0.0.1:5000"}, bind: "127.0.0.1:5000", adv: "127.0.0.1"},
		{name: "bind loopback, advertise another", cfg: Config{SpansHosts: true, Bind: "127.0.0.1", Advertise: "192.0.2.10"},
			bind: "127.0.0.1:0", adv: "192.0.2.10"},
		{name: "bind wildcard across hosts", cfg: Config{SpansHosts: true, Bind: "0.0.0.0:7946"}, bind: "0.0.0.0:7946", adv: "192.0.2.10"},
		{name: "bind IPv6 wildcard, include", cfg: Config{SpansHosts: true, Bind: "[::]:0", Include: "ib0"}, bind: "[::]:0", adv: "10.1.0.5"},
		{name: "bind wildcard on one host", cfg: Config{Bind: "0.0.0.0"}, bind: "0.0.0.0:0", adv: "127.0.0.1"},
		{name: "bind port only", cfg: Config{SpansHosts: true, Bind: ":7946"}, bind: "192.0.2.10:7946", adv: "192.0.2.10"},
		{name: "advertise local", cfg: Config{SpansHosts: true, Advertise: "10.1.0.5"}, bind: "10.1.0.5:0", adv: "10.1.0.5"},
		{name: "advertise foreign with port", cfg: Config{SpansHosts: true, Advertise: "203.0.113.7:9000"},
			bind: "0.0.0.0:0", adv: "203.0.113.7", port: 9000},
		{name: "advertise foreign IPv6", cfg: Config{SpansHosts: true, Advertise: "[2001:db8::7]:9000", Bind: ":4000"},
			bind: "[::]:4000", adv: "2001:db8::7", port: 9000},
		{name: "advertise wildcard", cfg: Config{Advertise: "0.0.0.0"}, errIn: "Advertise", errHas: "wildcard"},
		{name: "advertise IPv6 wildcard", cfg: Config{Advertise: "[::]:80"}, errIn: "Advertise", errHas: "wildcard"},
		{name: "advertise loopback across hosts", cfg: Config{SpansHosts: true, Advertise: "::1"}, errIn: "Advertise", errHas: "loopback"},
		{name: "advertise loopback on one host", cfg: Config{Advertise: "127.0.0.2"}, bind: "0.0.0.0:0", adv: "127.0.0.2"},
		{name: "advertise port only", cfg: Config{Advertise: ":80"}, errIn: "Advertise", errHas: "no address"},
		{name: "bind host name", cfg: Config{Bind: "node1:80"}, errIn: "Bind", errHas: "not an IP address"},
		{name: "bind bad port", cfg: Config{Bind: "10.1.0.5:99999"}, errIn: "Bind", errHas: "port"},
		{name: "bind garbage", cfg: Config{Bind: "10.1.0.5::x"}, errIn: "Bind"},
		{name: "bind with zone", cfg: Config{Bind: "[fe80::1%eth0]:80"}, errIn: "Bind", errHas: "zone"},
		{name: "bad include", cfg: Config{Include: "10.0.0.0/33"}, errIn: "Include", errHas: "CIDR"},
		{name: "bad exclude", cfg: Config{Exclude: "eth0,bad name"}, errIn: "Exclude"},
		{name: "names in errors", cfg: Config{SpansHosts: true, Include: "ib9", Names: Names{Include: "-if-include", Advertise: "-advertise"}},
			errIn: "-if-include", errHas: "matching -if-include=ib9 other than loopback, which is never published when the job's ranks run on several hosts (interfaces: lo 127.0.0.1/8 ::1/128; eth0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ifaces := tc.ifaces
			if ifaces == nil {
				ifaces = cluster
			}
			c, err := Choose(tc.cfg, ifaces)
			if verr := tc.cfg.Validate(); verr != nil && (err == nil || verr.Error() != err.Error()) {
				t.Fatalf("Validate: %v; Choose: %v", verr, err)
			}
			if tc.errIn != "" {
				var e *Error
				if !errors.As(err, &e) || e.Setting != tc.errIn || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("Choose: got %+v, %v; want an error naming %s containing %q", c, err, tc.errIn, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatalf("Choose: %v", err)
			}
			if c.Bind != tc.bind || c.Advertise.String() != tc.adv || c.AdvertisePort != tc.port {
				t.Fatalf("Choose = bind %s, advertise %s port %d; want %s, %s port %d", c.Bind, c.Advertise, c.AdvertisePort, tc.bind, tc.adv, tc.port)
			}
			if _, _, err := net.SplitHostPort(c.Bind); err != nil {
				t.Fatalf("Bind %q: %v", c.Bind, err)
			}
		})
	}
}

func TestPublish(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.1.0.5"), netip.MustParseAddr("fd00::5")
	for _, tc := range []struct {
		c      Choice
		listen string
		want   string
	}{
		{Choice{Advertise: v4}, "10.1.0.5:4567", "10.1.0.5:4567"},
		{Choice{Advertise: v4}, "[::]:4567", "10.1.0.5:4567"},
		{Choice{Advertise: v4}, "0.0.0.0:1", "10.1.0.5:1"},
		{Choice{Advertise: v4, AdvertisePort: 9000}, "0.0.0.0:4567", "10.1.0.5:9000"},
		{Choice{Advertise: v6}, "[fd00::5]:4567", "[fd00::5]:4567"},
		{Choice{Advertise: v4}, "10.1.0.5", ""},
		{Choice{Advertise: v4}, "10.1.0.5:0", ""},
		{Choice{Advertise: v4}, "10.1.0.5:http", ""},
	} {
		got, err := tc.c.Publish(tc.listen)
		if (err != nil) != (tc.want == "") || got != tc.want {
			t.Errorf("%+v.Publish(%q) = %q, %v; want %q", tc.c, tc.listen, got, err, tc.want)
		}
	}
}

// FuzzChoose checks Choose's promises on any settings and a route from
// any source address: no panic, a Bind address that listens, and across
// hosts a published address that is neither loopback nor a wildcard.
func FuzzChoose(f *testing.F) {
	f.Add("", "", "", "", true, "10.1.0.5")
	f.Add("0.0.0.0:7946", "", "ib0", "", true, "192.0.2.10")
	f.Add(":80", "203.0.113.7:9", "", "lo,eth0", false, "")
	f.Add("[::]:0", "[::1]", "fd00::/8", "10.0.0.0/8", true, "127.0.0.1")
	f.Fuzz(func(t *testing.T, bind, adv, inc, exc string, spans bool, src string) {
		var routes []Route
		if a, err := netip.ParseAddr(src); err == nil {
			routes = []Route{{Host: "peer", Dst: netip.MustParseAddr("198.51.100.1"), Src: a}}
		}
		c, err := Choose(Config{Bind: bind, Advertise: adv, Include: inc, Exclude: exc, SpansHosts: spans}, cluster, routes...)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Setting == "" {
				t.Fatalf("error %v names no setting", err)
			}
			return
		}
		if _, _, err := net.SplitHostPort(c.Bind); err != nil {
			t.Fatalf("Bind %q: %v", c.Bind, err)
		}
		pub, err := c.Publish("[::]:1234")
		if err != nil {
			t.Fatal(err)
		}
		ap := netip.MustParseAddrPort(pub)
		if ap.Addr().IsUnspecified() || (spans && ap.Addr().IsLoopback()) {
			t.Fatalf("published %s (spans hosts: %v)", pub, spans)
		}
	})
}

// Publishing publishes the chosen address with the listener's port, stores
// it, and does not call the exchange when there is nothing to publish.
func TestPublishing(t *testing.T) {
	c := Choice{Advertise: netip.MustParseAddr("10.1.2.3")}
	var got, published string
	exchange := c.Publishing(func(_ context.Context, a string) ([]string, error) {
		got = a
		return []string{a}, nil
	}, &published)
	if addrs, err := exchange(context.Background(), "0.0.0.0:4242"); err != nil || got != "10.1.2.3:4242" || published != got || len(addrs) != 1 {
		t.Fatalf("exchanged %q, published %q, %v, %v", got, published, addrs, err)
	}
	got = ""
	if _, err := exchange(context.Background(), "no-port"); err == nil || got != "" {
		t.Fatalf("a listener address without a port: %v, exchanged %q", err, got)
	}
}
