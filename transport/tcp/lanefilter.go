package tcp

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
)

// The watched lane's socket filter. The lane is connect()ed to the watched
// emitter, so the kernel queues there only datagrams that carry the
// emitter's address and port; but a source address can be forged (an
// attacker off the host on a network without source validation, or root),
// and a flood of forged datagrams beyond what the check drains fills the
// lane and drops the emitter's heartbeats with it. A classic BPF filter on
// the lane, which the kernel runs before it queues a datagram, drops every
// datagram that is not a frame of this job from the watched emitter's
// incarnation (once this rank knows it): the magic, the job ID, the
// sender's rank and incarnation, all in the frame's header. Such a
// datagram takes no room in the lane, and the forger must know the job ID
// and the emitter's incarnation, which travel only in the job's own frames.
// The frames that pass are authenticated as before.

// bpfPayload is where a UDP socket filter finds the datagram's payload:
// the filter sees the packet from its UDP header on.
const bpfPayload = 8

// laneFilter returns the filter program passing the frames of job from
// sender in incarnation inc (any incarnation if inc is 0).
func laneFilter(job uint64, sender ranks.Rank, inc uint64) []unix.SockFilter {
	type test struct {
		size uint16 // unix.BPF_H or unix.BPF_W
		at   uint32 // offset in the frame
		want uint32 // as the filter loads it: big-endian
	}
	le32 := func(v uint32) uint32 { // a little-endian field, loaded big-endian
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], v)
		return binary.BigEndian.Uint32(b[:])
	}
	tests := []test{
		{unix.BPF_H, 0, 'V'<<8 | 'G'},
		{unix.BPF_W, wire.HeaderJobAt, le32(uint32(job))},
		{unix.BPF_W, wire.HeaderJobAt + 4, le32(uint32(job >> 32))},
		{unix.BPF_W, wire.HeaderSenderAt, le32(sender)},
	}
	if inc != 0 {
		tests = append(tests,
			test{unix.BPF_W, wire.HeaderIncarnationAt, le32(uint32(inc))},
			test{unix.BPF_W, wire.HeaderIncarnationAt + 4, le32(uint32(inc >> 32))})
	}
	var prog []unix.SockFilter
	drop := uint8(2*len(tests) + 1) // the index of the last instruction
	for i, t := range tests {
		at := uint8(2*i + 1) // the jump's index
		prog = append(prog,
			unix.SockFilter{Code: unix.BPF_LD | t.size | unix.BPF_ABS, K: bpfPayload + t.at},
			unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: t.want, Jt: 0, Jf: drop - at - 1})
	}
	return append(prog,
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff}, // pass, whole
		unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: 0})          // drop
}

// setLaneFilter attaches prog to the lane (nil: detaches it); mu is
// write-held.
func (s *hbSocket) setLaneFilter(prog []unix.SockFilter) error {
	if s.lane < 0 {
		return nil
	}
	if prog == nil {
		err := unix.SetsockoptInt(s.lane, unix.SOL_SOCKET, unix.SO_DETACH_FILTER, 0)
		if err == unix.ENOENT {
			return nil // none attached
		}
		return err
	}
	return unix.SetsockoptSockFprog(s.lane, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: unsafe.SliceData(prog)})
}
