package shm

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/limit"
	"github.com/vigil-hpc/vigil/internal/unixcred"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/transport"
)

// helloPayload starts the authenticated frame a region's server sends
// with the memfd; the number of slot words follows (4 bytes, little-endian).
const helloPayload = "vigil-shm"

// helloMax bounds the hello frame's payload.
const helloMax = 64

// socketName is the abstract Unix socket of rank's region in job.
func socketName(job uint64, rank uint32) string {
	return fmt.Sprintf("@vigil-shm/%016x/%d", job, rank)
}

// Region is an observer's heartbeat slot array in shared memory, served to
// the emitters of its host.
type Region struct {
	p     wire.Params
	fd    int
	mem   []byte
	slots *transport.Slots
	ln    *net.UnixListener
	log   *slog.Logger
	logs  *limit.Log // what a stranger's connection makes us log
	stop  chan struct{}
	wg    sync.WaitGroup

	mu     sync.Mutex
	closed bool
	served uint64
}

// NewRegion creates the slot array of p.N words for rank p.Rank of job
// p.JobID and starts serving it. p.Key authenticates the region to the
// emitters that map it.
func NewRegion(p wire.Params, log *slog.Logger) (*Region, error) {
	if p.N < 1 {
		return nil, fmt.Errorf("shm: %d ranks, want ≥ 1", p.N)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	size := (p.N*8 + os.Getpagesize() - 1) &^ (os.Getpagesize() - 1)
	fd, err := unix.MemfdCreate("vigil-slots", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: ftruncate: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: mmap: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socketName(p.JobID, p.Rank), Net: "unix"})
	if err != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		return nil, fmt.Errorf("shm: listening for the ranks of this host: %w", err)
	}
	r := &Region{p: p, fd: fd, mem: mem, ln: ln, log: log, logs: limit.NewLog(log, time.Second), stop: make(chan struct{}),
		slots: transport.SlotsOver(unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), p.N))}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Slots returns the slot array: the node's Config.Slots.
func (r *Region) Slots() *transport.Slots { return r.slots }

// Served returns how many emitters mapped the region.
func (r *Region) Served() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.served
}

func (r *Region) serve() {
	defer r.wg.Done()
	q := r.p
	q.MaxPayload = helloMax
	codec := wire.NewCodec(q)
	var hello []byte
	hello = append(hello, helloPayload...)
	hello = append(hello, byte(r.p.N), byte(r.p.N>>8), byte(r.p.N>>16), byte(r.p.N>>24))
	frame, err := codec.Append(nil, wire.Msg, hello)
	if err != nil {
		r.log.Error("shm: encoding the region's hello", "err", err)
		return
	}
	// Anyone on the host can connect (the socket's name is in
	// /proc/net/unix): failures are logged once a second at most, and an
	// accept that fails (out of file descriptors) backs off.
	acc := limit.Acceptor{Log: r.logs, Key: "shm", Stop: r.stop}
	for {
		c, err := acc.Accept(r.ln)
		if err != nil {
			return // closed
		}
		if err := r.give(c.(*net.UnixConn), frame); err != nil {
			r.logs.Log("refused", slog.LevelWarn, "shm: not sharing the slot array", "err", err)
		}
		c.Close()
	}
}

// give sends the memfd and the authenticated hello to a peer of our user.
func (r *Region) give(c *net.UnixConn, frame []byte) error {
	uid, _, err := peerUID(c)
	if err != nil {
		return err
	}
	if uid != uint32(os.Getuid()) {
		return fmt.Errorf("peer runs as uid %d, not %d", uid, os.Getuid())
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return net.ErrClosed
	}
	r.served++
	r.mu.Unlock()
	_, _, err = c.WriteMsgUnix(frame, unix.UnixRights(r.fd), nil)
	return err
}

// peerUID returns the user id and the process id (0 from another PID
// namespace) of the process at the other end of c.
func peerUID(c *net.UnixConn) (uid uint32, pid int32, err error) {
	cred, err := unixcred.Peer(c)
	if err != nil {
		return 0, 0, err
	}
	return cred.Uid, cred.Pid, nil
}

// Close stops serving. The memory stays mapped (the node may still read
// it); it is released when the process exits.
func (r *Region) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	err := r.ln.Close()
	r.wg.Wait()
	unix.Close(r.fd)
	return err
}
