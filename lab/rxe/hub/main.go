// Command hub is the Ethernet hub of lab/rxe/run.sh's multi-guest runs: qemu's
// dgram network backend joins two guests point to point, so for three or
// more each guest sends its frames to a Unix datagram socket of the hub,
// which repeats every frame to every other guest.
//
//	hub HUB0:GUEST0 HUB1:GUEST1 ...
//
// The hub binds each HUBi socket (guest i's remote.path) and sends to each
// GUESTi socket (guest i's local.path, bound by its qemu). Frames to a guest
// that is not there (not booted yet, or powered off) are dropped, as on a
// wire. It runs until killed.
package main

import (
	"fmt"
	"net"
	"os"
	"strings"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hub:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: hub HUB0:GUEST0 HUB1:GUEST1 ... (at least two guests)")
	}
	conns := make([]*net.UnixConn, len(args))
	guests := make([]*net.UnixAddr, len(args))
	for i, a := range args {
		hub, guest, ok := strings.Cut(a, ":")
		if !ok || hub == "" || guest == "" {
			return fmt.Errorf("%q: want HUB_SOCKET:GUEST_SOCKET", a)
		}
		os.Remove(hub)
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: hub, Net: "unixgram"})
		if err != nil {
			return err
		}
		conns[i], guests[i] = c, &net.UnixAddr{Name: guest, Net: "unixgram"}
	}
	errs := make(chan error, len(conns))
	for i, c := range conns {
		go func() {
			buf := make([]byte, 65536)
			for {
				n, err := c.Read(buf)
				if err != nil {
					errs <- err
					return
				}
				for j, g := range guests {
					if j != i {
						conns[j].WriteToUnix(buf[:n], g) // a guest not there loses the frame
					}
				}
			}
		}()
	}
	return <-errs
}
