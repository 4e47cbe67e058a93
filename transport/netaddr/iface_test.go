package netaddr

import (
	"net/netip"
	"testing"
)

// TestInterfaces reads this host's interfaces: the loopback interface is
// there, flagged, with 127.0.0.1/8.
func TestInterfaces(t *testing.T) {
	ifs, err := Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifs {
		if ifc.Loopback && ifc.Up && len(ifc.Addrs) > 0 {
			for _, p := range ifc.Addrs {
				if p == netip.MustParsePrefix("127.0.0.1/8") {
					return
				}
			}
		}
	}
	t.Fatalf("no up loopback interface with 127.0.0.1/8 in %v", ifs)
}
