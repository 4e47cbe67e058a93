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

// drainBudget bounds the batches one drain reads from one socket: what a
// flood leaves waiting is the kernel's to drop (counted: kernelDrops), not
// the check's to wait for.
const drainBudget = 16

// hbSocket is the heartbeat path: UDP sockets bound to the listener's
// address and port, kept out of Go's network poller. The emitter thread
// sends each heartbeat with one sendto on fd; nothing wakes on the
// receiving side: the datagrams wait in a socket until the observer's
// check drains them with recvmmsg (DrainHeartbeats).
//
// Two sockets receive, both bound to the port with SO_REUSEPORT (which
// the kernel grants only to sockets of one user): lane is connect()ed to
// the emitter the observer watches (watch), so the kernel puts that
// emitter's datagrams there and nothing else, and fd gets the rest (other
// senders, junk). A connected socket wins the kernel's lookup for its
// peer, and the port's hash never picks it for another sender: no rate of
// junk at the port reaches lane or makes it drop the emitter's heartbeats.
// The descriptors are closed only under mu, so a send or drain never uses
// a recycled one.
type hbSocket struct {
	mu      sync.RWMutex // write-held by close
	fd      int          // -1 once closed
	lane    int          // -1 once closed
	self    netip.AddrPort
	v6      bool
	peers   []rawAddr // indexed by rank; len 0 when unknown
	addrs   []netip.AddrPort
	watched int64 // the rank lane is connected to, -1 for none (then to self)

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

// openHBSocket binds the UDP sockets to addr (the listener's address).
func openHBSocket(addr *net.TCPAddr, codec *wire.Codec) (*hbSocket, error) {
	ap := addr.AddrPort()
	ip := ap.Addr().Unmap()
	s := &hbSocket{fd: -1, lane: -1, v6: ip.Is6(), codec: codec, watched: -1, self: netip.AddrPortFrom(ip, ap.Port())}
	var err error
	if s.fd, err = s.bind(); err != nil {
		return nil, err
	}
	if s.lane, err = s.bind(); err == nil {
		err = unix.Connect(s.lane, sockaddr(s.placeholder()))
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("tcp: heartbeat socket: the watched emitter's: %w", err)
	}
	for i := range s.msgs {
		s.iovs[i].Base = &s.bufs[i][0]
		s.iovs[i].SetLen(len(s.bufs[i]))
		s.msgs[i].Hdr.Iov = &s.iovs[i]
		s.msgs[i].Hdr.SetIovlen(1)
	}
	return s, nil
}

// bind opens one UDP socket bound to the listener's address and port,
// sharing it with this process's other heartbeat socket.
func (s *hbSocket) bind() (int, error) {
	family := unix.AF_INET
	if s.v6 {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return -1, fmt.Errorf("tcp: heartbeat socket: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, hbRcvBuf) // best effort: capped by rmem_max
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("tcp: heartbeat socket: SO_REUSEPORT: %w", err)
	}
	if err := unix.Bind(fd, sockaddr(s.self)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("tcp: heartbeat socket: bind UDP %s: %w", s.self, err)
	}
	return fd, nil
}

// placeholder is the peer of lane while no emitter is watched: this
// socket's own address, which sends no heartbeat to itself.
func (s *hbSocket) placeholder() netip.AddrPort {
	ip := s.self.Addr()
	if ip.IsUnspecified() {
		ip = netip.IPv6Loopback()
		if !s.v6 {
			ip = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
	}
	return netip.AddrPortFrom(ip, s.self.Port())
}

// watch connects lane to rank r's address (r < 0: none), so that from
// now on the kernel queues r's heartbeats there, away from any other
// sender's datagrams, after filter (nil: none; lanefilter.go) passed them.
// A rank whose address is unknown leaves lane on the placeholder until
// setPeers.
func (s *hbSocket) watch(r int64, filter []unix.SockFilter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watched = r
	if err := s.setLaneFilter(filter); err != nil {
		return fmt.Errorf("the lane's filter: %w", err)
	}
	return s.connectLane()
}

// refilter replaces the lane's filter while rank r is watched.
func (s *hbSocket) refilter(r int64, filter []unix.SockFilter) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched != r {
		return nil
	}
	return s.setLaneFilter(filter)
}

// connectLane connects lane to the watched rank's address; mu is
// write-held.
func (s *hbSocket) connectLane() error {
	if s.lane < 0 {
		return nil
	}
	to := s.placeholder()
	if s.watched >= 0 && s.watched < int64(len(s.addrs)) && s.addrs[s.watched].IsValid() {
		to = s.addrs[s.watched]
	}
	return unix.Connect(s.lane, sockaddr(to))
}

// kernelDrops returns how many datagrams the kernel dropped at both
// sockets (a full receive buffer, or the lane's filter), from SO_MEMINFO.
func (s *hbSocket) kernelDrops() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return drops(s.fd) + drops(s.lane)
}

// laneDrops is kernelDrops of the lane alone.
func (s *hbSocket) laneDrops() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return drops(s.lane)
}

// drops returns the datagrams the kernel dropped at socket fd (0 for -1).
func drops(fd int) uint64 {
	if fd < 0 {
		return 0
	}
	var info [unix.SK_MEMINFO_VARS]uint32
	l := uint32(unsafe.Sizeof(info))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&l)), 0)
	if errno == 0 && l > unix.SK_MEMINFO_DROPS*4 {
		return uint64(info[unix.SK_MEMINFO_DROPS])
	}
	return 0
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
	aps := make([]netip.AddrPort, len(addrs))
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
		aps[i] = netip.AddrPortFrom(ip, ap.Port())
		peers[i] = toRaw(aps[i])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peers, s.addrs = peers, aps
	return s.connectLane()
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

// recv receives the datagrams waiting in one socket (lane, or else fd),
// up to drainBatch, and returns how many it got (0 when none wait or the
// socket is closed); see datagram. It never blocks.
func (s *hbSocket) recv(lane bool) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fd := s.fd
	if lane {
		fd = s.lane
	}
	if fd < 0 {
		return 0
	}
	for i := range s.msgs {
		s.msgs[i].Len = 0
	}
	r, _, errno := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&s.msgs[0])),
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

// close closes the sockets; later sends and drains do nothing.
func (s *hbSocket) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, fd := range []*int{&s.fd, &s.lane} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}
