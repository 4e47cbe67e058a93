package netaddr

import (
	"net/netip"
	"testing"
)

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" : an error
	}{
		{"", ""},
		{" , ,", ""},
		{"eth0", "eth0"},
		{"eth0, ib0 ,10.1.0.0/16", "eth0,ib0,10.1.0.0/16"},
		{"10.1.2.3/16", "10.1.0.0/16"},
		{"10.1.2.3", "10.1.2.3/32"},
		{"::ffff:10.1.2.3", "10.1.2.3/32"},
		{"fd00::1/8", "fd00::/8"},
		{"::ffff:10.1.2.3/112", "10.1.0.0/16"},
		{"enp0s31f6.100", "enp0s31f6.100"},
	} {
		l, err := ParseList(tc.in)
		if err != nil || l.String() != tc.want {
			t.Errorf("ParseList(%q) = %q, %v; want %q", tc.in, l, err, tc.want)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "eth0:1", "a very long interface name", "bad name", "fe80::1%eth0", "/8", "x/y"} {
		if l, err := ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) = %q, want an error", bad, l)
		}
	}
}

func TestListMatch(t *testing.T) {
	l, err := ParseList("ib0,10.1.0.0/16,fd00::/8,192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ifname, ip string
		want       bool
	}{
		{"ib0", "192.168.1.1", true},
		{"eth0", "10.1.255.3", true},
		{"eth0", "10.2.0.1", false},
		{"eth0", "::ffff:10.1.0.1", true},
		{"eth0", "fd12::1", true},
		{"eth0", "fe80::1%eth0", false},
		{"eth0", "192.0.2.7", true},
		{"eth0", "192.0.2.8", false},
		{"ib", "10.0.0.1", false},
	} {
		if got := l.Match(tc.ifname, netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("Match(%s, %s) = %v, want %v", tc.ifname, tc.ip, got, tc.want)
		}
	}
	if (List{}).Match("eth0", netip.MustParseAddr("10.0.0.1")) || !(List{}).Empty() {
		t.Error("the zero List matches something or is not empty")
	}
}

// FuzzParseList: any accepted list prints as a list that parses back to
// the same list.
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"eth0,ib0", "10.1.0.0/16, fd00::/8", "10.1.2.3", "::ffff:1.2.3.4/120", "a,,b", "x/y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseList(s)
		if err != nil {
			return
		}
		l2, err := ParseList(l.String())
		if err != nil {
			t.Fatalf("ParseList(%q) printed %q, which does not parse: %v", s, l, err)
		}
		if l2.String() != l.String() {
			t.Fatalf("ParseList(%q) printed %q, which parses as %q", s, l, l2)
		}
	})
}
