package tcp

import (
	"net"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// hbConn is an incoming connection that has carried a heartbeat: the
// emitter's heartbeat connection to us. HeartbeatBacklog looks at what waits
// in it.
type hbConn struct {
	raw syscall.RawConn
	// buffered is the number of bytes its reader goroutine holds read but
	// not yet decoded, stored after every frame.
	buffered atomic.Int32
}

// pending returns the bytes of c waiting in this process: in the socket's
// receive queue (SIOCINQ, the FIONREAD of TCP) and in the read buffer.
func (c *hbConn) pending() int {
	n := int(c.buffered.Load())
	_ = c.raw.Control(func(fd uintptr) {
		if q, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n += q
		}
	})
	return n
}

// HeartbeatBacklog implements transport.Backlogged: it reports whether a
// whole heartbeat frame from rank from waits in this process, in the socket
// or in the read buffer of one of its heartbeat connections, not yet stored
// in its slot. Those bytes start at a frame boundary (the reader decodes
// whole frames), so at least HeartbeatFrameSize of them hold a complete
// heartbeat; a partial frame alone, such as the remains of an emitter that
// died while writing, is no backlog.
func (t *Transport) HeartbeatBacklog(from ranks.Rank) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.hbIn[from] {
		if c.pending() >= wire.HeartbeatFrameSize {
			return true
		}
	}
	return false
}

// addHBConn records c as a heartbeat connection from rank r; the returned
// function forgets it.
func (t *Transport) addHBConn(r ranks.Rank, c *hbConn) (remove func()) {
	t.mu.Lock()
	t.hbIn[r] = append(t.hbIn[r], c)
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		cs := t.hbIn[r]
		for i, x := range cs {
			if x == c {
				cs = append(cs[:i], cs[i+1:]...)
				break
			}
		}
		if len(cs) == 0 {
			delete(t.hbIn, r)
		} else {
			t.hbIn[r] = cs
		}
	}
}

var _ transport.Backlogged = (*Transport)(nil)

// heartbeatConn returns c as a heartbeat connection, nil if it has no file
// descriptor to look into.
func heartbeatConn(c net.Conn) *hbConn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &hbConn{raw: raw}
}
