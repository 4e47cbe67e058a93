package tcp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// drainBatch is the number of datagrams one recvmmsg call collects.
const drainBatch = 64

// hbRcvBuf is the receive buffer asked for the heartbeat socket: room for
// thousands of heartbeats between two checks.
const hbRcvBuf = 1 << 20

// hbSocket is the heartbeat path: one UDP socket per rank, bound to the
// listener's address and port, kept out of Go's network poller. The emitter
// thread sends each heartbeat with one sendto; nothing wakes on the
// receiving side: the datagrams wait in the socket until the observer's
// check drains them with recvmmsg (DrainHeartbeats). The socket's
// descriptor is closed only under mu, so a send or drain never uses a
// recycled descriptor.
type hbSocket struct {
	mu    sync.RWMutex // write-held by close
	fd    int          // -1 once closed
	v6    bool
	peers []rawAddr // indexed by rank; len 0 when unknown

	// The drain's state: the heartbeat thread only.
	codec *wire.Codec
	msgs  [drainBatch]unix.Mmsghdr
	iovs  [drainBatch]unix.Iovec
	bufs  [drainBatch][wire.HeartbeatFrameSize + 1]byte // +1: longer datagrams show as such
}

// rawAddr is a peer's socket address in the kernel's layout.
type rawAddr struct {
	sa  unix.RawSockaddrAny
	len uint32
}

// openHBSocket binds a UDP socket to addr (the listener's address).
func openHBSocket(addr *net.TCPAddr, codec *wire.Codec) (*hbSocket, error) {
	ap := addr.AddrPort()
	ip := ap.Addr().Unmap()
	s := &hbSocket{fd: -1, v6: ip.Is6(), codec: codec}
	family := unix.AF_INET
	if s.v6 {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, fmt.Errorf("tcp: heartbeat socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, hbRcvBuf) // best effort: capped by rmem_max
	if err := unix.Bind(fd, sockaddr(netip.AddrPortFrom(ip, ap.Port()))); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("tcp: heartbeat socket: bind UDP %s: %w", ap, err)
	}
	s.fd = fd
	for i := range s.msgs {
		s.iovs[i].Base = &s.bufs[i][0]
		s.iovs[i].SetLen(len(s.bufs[i]))
		s.msgs[i].Hdr.Iov = &s.iovs[i]
		s.msgs[i].Hdr.SetIovlen(1)
	}
	return s, nil
}

func sockaddr(ap netip.AddrPort) unix.Sockaddr {
	if ap.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
}

// setPeers resolves the peers' addresses (host:port, the same port as
// their listener) into kernel socket addresses.
func (s *hbSocket) setPeers(addrs []string) error {
	peers := make([]rawAddr, len(addrs))
	for i, a := range addrs {
		if a == "" {
			continue
		}
		ua, err := net.ResolveUDPAddr("udp", a)
		if err != nil {
			return fmt.Errorf("tcp: SetPeers: rank %d: %w", i, err)
		}
		ap := ua.AddrPort()
		ip := ap.Addr().Unmap()
		if s.v6 {
			ip = netip.AddrFrom16(ip.As16()) // a v4 peer as a mapped address
		} else if !ip.Is4() {
			return fmt.Errorf("tcp: SetPeers: rank %d: IPv6 address %s, but this rank listens on IPv4", i, a)
		}
		peers[i] = toRaw(netip.AddrPortFrom(ip, ap.Port()))
	}
	s.mu.Lock()
	s.peers = peers
	s.mu.Unlock()
	return nil
}

func toRaw(ap netip.AddrPort) rawAddr {
	var r rawAddr
	port := ap.Port()
	if ap.Addr().Is4() {
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&r.sa))
		sa.Family = unix.AF_INET
		sa.Port = port<<8 | port>>8 // network byte order
		sa.Addr = ap.Addr().As4()
		r.len = unix.SizeofSockaddrInet4
		return r
	}
	sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(&r.sa))
	sa.Family = unix.AF_INET6
	sa.Port = port<<8 | port>>8
	sa.Addr = ap.Addr().As16()
	r.len = unix.SizeofSockaddrInet6
	return r
}

// errNoAddr is a heartbeat to a rank whose address is not known yet.
var errNoAddr = errors.New("no address")

// send writes one heartbeat frame to rank to with one sendto. It never
// blocks: a full socket buffer drops the heartbeat.
func (s *hbSocket) send(to ranks.Rank, frame []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.fd < 0 {
		return net.ErrClosed
	}
	if int(to) >= len(s.peers) || s.peers[to].len == 0 {
		return errNoAddr
	}
	p := &s.peers[to]
	_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(s.fd), uintptr(unsafe.Pointer(&frame[0])),
		uintptr(len(frame)), unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(&p.sa)), uintptr(p.len))
	if errno != 0 {
		return errno
	}
	return nil
}

// dest returns the socket and rank to's kernel address, for a sender
// outside Go.
func (s *hbSocket) dest(to ranks.Rank) (fd int, addr []byte, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.fd < 0 || int(to) >= len(s.peers) || s.peers[to].len == 0 {
		return -1, nil, false
	}
	p := &s.peers[to]
	return s.fd, unsafe.Slice((*byte)(unsafe.Pointer(&p.sa)), p.len), true
}

// recv receives the datagrams waiting in the socket, up to drainBatch, and
// returns how many it got (0 when none wait or the socket is closed); see
// datagram. It never blocks.
func (s *hbSocket) recv() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.fd < 0 {
		return 0
	}
	for i := range s.msgs {
		s.msgs[i].Len = 0
	}
	r, _, errno := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&s.msgs[0])),
		drainBatch, unix.MSG_DONTWAIT, 0, 0)
	if errno != 0 { // EAGAIN: empty
		return 0
	}
	return int(r)
}

// datagram returns the i-th datagram of the last recv, valid until the
// next recv. A datagram longer than a heartbeat frame shows as one byte
// longer.
func (s *hbSocket) datagram(i int) []byte {
	return s.bufs[i][:min(int(s.msgs[i].Len), len(s.bufs[i]))]
}

// close closes the socket; later sends and drains do nothing.
func (s *hbSocket) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}
