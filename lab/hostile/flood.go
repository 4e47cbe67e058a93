package hostile

import (
	"context"
	"net/netip"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// floodSegs is how many datagrams one UDP GSO send carries: the kernel
// cuts the buffer into that many datagrams (UDP_SEGMENT), each delivered
// on its own, as if sent one by one.
const floodSegs = 64

// Flood sends the datagrams (all of one size) to dst, round after round,
// from one socket on one locked thread with sendmmsg, 16 buffers per call
// of 64 datagrams each (UDP GSO; without it, one datagram per buffer),
// until ctx is done; it returns how many datagrams the kernel took and
// for how long.
func Flood(ctx context.Context, dst netip.AddrPort, dgrams [][]byte) (uint64, time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}); err != nil {
		return 0, 0, err
	}
	size := len(dgrams[0])
	segs := floodSegs
	if unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT, size) != nil {
		segs = 1
	}
	const batch = 16
	var buf []byte
	for i := range batch * segs {
		buf = append(buf, dgrams[i%len(dgrams)]...)
	}
	msgs := make([]unix.Mmsghdr, batch)
	iovs := make([]unix.Iovec, batch)
	for i := range msgs {
		iovs[i].Base = &buf[i*segs*size]
		iovs[i].SetLen(segs * size)
		msgs[i].Hdr.Iov = &iovs[i]
		msgs[i].Hdr.SetIovlen(1)
	}
	var sent uint64
	start := time.Now()
	for ctx.Err() == nil {
		r, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), batch, 0, 0, 0)
		if errno == 0 {
			sent += uint64(r) * uint64(segs)
		} // ECONNREFUSED (an ICMP error from a port that closed), ENOBUFS: go on
	}
	runtime.KeepAlive(buf)
	return sent, time.Since(start), nil
}

// SpoofFlood is Flood from a forged source, src (a Spoofer: one sendmmsg
// of len(dgrams) datagrams at a time, no GSO), at most rate datagrams a
// second (0: as fast as it can).
func SpoofFlood(ctx context.Context, src, dst netip.AddrPort, dgrams [][]byte, rate float64) (uint64, time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sp, err := NewSpoofer(src, dst)
	if err != nil {
		return 0, 0, err
	}
	defer sp.Close()
	sp.Load(dgrams)
	var sent uint64
	start := time.Now()
	for ctx.Err() == nil {
		if k, err := sp.Send(); err == nil {
			sent += uint64(k)
		} // ENOBUFS: go on
		if rate > 0 {
			if ahead := time.Duration(float64(sent)/rate*float64(time.Second)) - time.Since(start); ahead > 0 {
				time.Sleep(ahead)
			}
		}
	}
	return sent, time.Since(start), nil
}
