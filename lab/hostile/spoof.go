package hostile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Spoofer sends IPv4 UDP datagrams whose source address and port are
// forged, through a raw socket (CAP_NET_RAW): what an attacker off the
// host, or root on it, can send. The kernel fills in the IP header's
// length, identification and checksum; the UDP checksum is left 0 (none,
// valid over IPv4).
type Spoofer struct {
	fd       int
	src, dst netip.AddrPort
	to       unix.RawSockaddrInet4
	pkts     [][]byte
	msgs     []unix.Mmsghdr
	iovs     []unix.Iovec
}

// NewSpoofer returns a Spoofer of datagrams from src to dst (IPv4).
func NewSpoofer(src, dst netip.AddrPort) (*Spoofer, error) {
	if !src.Addr().Is4() || !dst.Addr().Is4() {
		return nil, errors.New("hostile: spoofer: IPv4 addresses only")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return nil, fmt.Errorf("hostile: raw socket (needs CAP_NET_RAW): %w", err)
	}
	s := &Spoofer{fd: fd, src: src, dst: dst}
	s.to.Family = unix.AF_INET
	s.to.Addr = dst.Addr().As4()
	return s, nil
}

// packet is the IPv4 datagram carrying payload from s.src to s.dst.
func (s *Spoofer) packet(payload []byte) []byte {
	b := make([]byte, 28+len(payload))
	b[0] = 0x45 // IPv4, 20-byte header
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	b[8] = 64 // TTL
	b[9] = unix.IPPROTO_UDP
	src, dst := s.src.Addr().As4(), s.dst.Addr().As4()
	copy(b[12:], src[:])
	copy(b[16:], dst[:])
	binary.BigEndian.PutUint16(b[20:], s.src.Port())
	binary.BigEndian.PutUint16(b[22:], s.dst.Port())
	binary.BigEndian.PutUint16(b[24:], uint16(8+len(payload)))
	copy(b[28:], payload)
	return b
}

// Load prepares the payloads that Send sends, in order.
func (s *Spoofer) Load(payloads [][]byte) {
	s.pkts = s.pkts[:0]
	for _, p := range payloads {
		s.pkts = append(s.pkts, s.packet(p))
	}
	s.msgs = make([]unix.Mmsghdr, len(s.pkts))
	s.iovs = make([]unix.Iovec, len(s.pkts))
	for i, p := range s.pkts {
		s.iovs[i].Base = &p[0]
		s.iovs[i].SetLen(len(p))
		s.msgs[i].Hdr.Name = (*byte)(unsafe.Pointer(&s.to))
		s.msgs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
		s.msgs[i].Hdr.Iov = &s.iovs[i]
		s.msgs[i].Hdr.SetIovlen(1)
	}
}

// Send sends the loaded datagrams with one sendmmsg and returns how many
// the kernel took.
func (s *Spoofer) Send() (int, error) {
	if len(s.msgs) == 0 {
		return 0, nil
	}
	r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&s.msgs[0])), uintptr(len(s.msgs)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// Close closes the raw socket.
func (s *Spoofer) Close() error { return unix.Close(s.fd) }
