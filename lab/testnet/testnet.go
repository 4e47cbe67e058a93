// Package testnet holds helpers shared by Vigil's tests: free loopback
// addresses and a goroutine-leak check.
package testnet

import (
	"net"
	"testing"
)

// FreeAddrs returns n loopback TCP addresses whose ports were free a moment
// ago (all held open together, so they are distinct, then released).
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var out []string
	var lns []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}
