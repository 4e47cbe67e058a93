package hostile

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// Capture records the payloads of the IPv4 UDP datagrams sent from one
// address and port, as seen on one network device (AF_PACKET:
// CAP_NET_RAW).
type Capture struct {
	fd   int
	done chan [][]byte
}

// StartCapture starts recording, on device dev ("lo", or a bridge port),
// the payloads of the UDP datagrams sent from src (IPv4).
func StartCapture(dev string, src netip.AddrPort) (*Capture, error) {
	ifc, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, err
	}
	// Every protocol: a tap of one protocol comes after a bridge port's
	// handler, which takes the frames it forwards.
	proto := uint16(unix.ETH_P_ALL)
	proto = proto<<8 | proto>>8 // network byte order
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return nil, fmt.Errorf("hostile: packet capture (needs CAP_NET_RAW): %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifc.Index}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 50_000})
	c := &Capture{fd: fd, done: make(chan [][]byte, 1)}
	loopback := ifc.Flags&net.FlagLoopback != 0
	addr := src.Addr().As4()
	go func() {
		var got [][]byte
		buf := make([]byte, 65536)
		for {
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil {
				break // closed by Stop
			}
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && loopback && ll.Pkttype == unix.PACKET_OUTGOING {
				continue // loopback shows each packet twice
			}
			p := buf[:n]
			if len(p) < 28 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_UDP {
				continue
			}
			ihl := int(p[0]&15) * 4
			if len(p) < ihl+8 || [4]byte(p[12:16]) != addr || binary.BigEndian.Uint16(p[ihl:]) != src.Port() {
				continue
			}
			got = append(got, append([]byte(nil), p[ihl+8:]...))
		}
		c.done <- got
	}()
	return c, nil
}

// Stop ends the capture and returns the payloads, in the order seen.
func (c *Capture) Stop() [][]byte {
	unix.Shutdown(c.fd, unix.SHUT_RDWR)
	unix.Close(c.fd)
	select {
	case got := <-c.done:
		return got
	case <-time.After(2 * time.Second):
		return nil
	}
}
