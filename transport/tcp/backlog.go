package tcp

import (
	"net"
	"slices"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// inConn counts what the reader goroutine of one incoming connection has
// read from its socket and what it has finished with, so that bytes read
// into its buffer but not yet decoded and stored still count as waiting.
// Once the connection has carried a heartbeat (it is the emitter's heartbeat
// connection to us) HeartbeatBacklog looks at it.
type inConn struct {
	net.Conn
	raw syscall.RawConn // nil when the connection has no descriptor
	// read is the number of bytes read from the socket; done the number of
	// them that the reader has decoded and acted on (stored after each
	// heartbeat). Both only grow.
	read, done atomic.Int64
}

// Read counts what the reader takes from the socket.
func (c *inConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// pending returns the bytes of c waiting in this process: in the socket's
// receive queue (SIOCINQ, the FIONREAD of TCP) and read but not yet acted on.
func (c *inConn) pending() int64 {
	n := c.read.Load() - c.done.Load()
	if c.raw != nil {
		_ = c.raw.Control(func(fd uintptr) {
			if q, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
				n += int64(q)
			}
		})
	}
	return n
}

// HeartbeatBacklog implements transport.Backlogged: it reports whether a
// whole heartbeat frame from rank from waits in this process, in the socket
// of one of its heartbeat connections or read by its reader goroutine but
// not yet stored in the slot. Those bytes start at a frame boundary (the
// reader acts on whole frames), so at least HeartbeatFrameSize of them hold a
// complete heartbeat; a partial frame alone, such as the remains of an
// emitter that died while writing, is no backlog.
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
func (t *Transport) addHBConn(r ranks.Rank, c *inConn) (remove func()) {
	t.mu.Lock()
	t.hbIn[r] = append(t.hbIn[r], c)
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		cs := slices.DeleteFunc(t.hbIn[r], func(x *inConn) bool { return x == c })
		if len(cs) == 0 {
			delete(t.hbIn, r)
		} else {
			t.hbIn[r] = cs
		}
	}
}

var _ transport.Backlogged = (*Transport)(nil)

// newInConn wraps an accepted connection for counting.
func newInConn(c net.Conn) *inConn {
	ic := &inConn{Conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			ic.raw = raw
		}
	}
	return ic
}
