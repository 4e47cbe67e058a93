package shm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// Retry bounds of the attach to an observer that could not be mapped (on
// another host, or not up yet).
const (
	minRetry = 50 * time.Millisecond
	maxRetry = 5 * time.Second
)

// Transport is a transport.Transport whose heartbeats to the ranks of this
// host are stores into their shared-memory slot arrays (see Wrap).
type Transport struct {
	inner transport.Transport
	drain func()
	p     wire.Params
	log   *slog.Logger

	maps             []atomic.Pointer[transport.Slots] // observer rank → its mapped region
	procs            []atomic.Pointer[process]         // rank → its agent's process, once mapped (nil: unknown)
	stored, viaInner atomic.Uint64

	mu      sync.Mutex
	retryAt []time.Time // next attach attempt per rank
	backoff []time.Duration
	pending []bool
	closed  bool
	wg      sync.WaitGroup
}

// Wrap returns inner with shared-memory heartbeats to the ranks of this
// host. p names this rank and the job (JobID, Key, Rank, N) exactly as the
// regions of the other ranks were created. Closing the result closes inner.
func Wrap(inner transport.Transport, p wire.Params, log *slog.Logger) *Transport {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Transport{inner: inner, p: p, log: log,
		maps: make([]atomic.Pointer[transport.Slots], p.N), procs: make([]atomic.Pointer[process], p.N), retryAt: make([]time.Time, p.N),
		backoff: make([]time.Duration, p.N), pending: make([]bool, p.N)}
	if d, ok := inner.(transport.Drainer); ok {
		t.drain = d.DrainHeartbeats
	}
	return t
}

// Inner returns the wrapped transport.
func (t *Transport) Inner() transport.Transport { return t.inner }

// Send implements transport.Transport: messages go through the inner
// transport.
func (t *Transport) Send(to ranks.Rank, payload []byte) error { return t.inner.Send(to, payload) }

// SendHeartbeat implements transport.Transport: one atomic store into the
// observer's region when it is mapped; otherwise the inner transport's
// heartbeat, and an attach in the background when one is due.
func (t *Transport) SendHeartbeat(to ranks.Rank, seq uint64) error {
	if int64(to) >= int64(len(t.maps)) {
		return transport.ErrUnknownRank
	}
	if s := t.maps[to].Load(); s != nil {
		s.Store(t.p.Rank, seq)
		t.stored.Add(1)
		return nil
	}
	t.maybeAttach(to)
	t.viaInner.Add(1)
	return t.inner.SendHeartbeat(to, seq)
}

// DrainHeartbeats implements transport.Drainer for an inner transport that
// does.
func (t *Transport) DrainHeartbeats() {
	if t.drain != nil {
		t.drain()
	}
}

// HeartbeatWord implements transport.Worder: this rank's word in to's
// region once it is mapped; until then it starts an attach in the
// background when one is due, as SendHeartbeat does.
func (t *Transport) HeartbeatWord(to ranks.Rank) *uint64 {
	if int64(to) >= int64(len(t.maps)) {
		return nil
	}
	if s := t.maps[to].Load(); s != nil {
		return s.Word(t.p.Rank)
	}
	t.maybeAttach(to)
	return nil
}

// LifeWord implements transport.LifeWords: r's own word in r's region
// once it is mapped; until then it starts an attach in the background when
// one is due, as HeartbeatWord does.
func (t *Transport) LifeWord(r ranks.Rank) *uint64 {
	if int64(r) >= int64(len(t.maps)) {
		return nil
	}
	if s := t.maps[r].Load(); s != nil {
		return s.Word(r)
	}
	t.mu.Lock() // not the emitter thread: it may wait for the lock
	t.attachLocked(r)
	t.mu.Unlock()
	return nil
}

// Runnable implements transport.LifeWords: whether rank r's agent, whose
// region is mapped, is a process of this host that is neither stopped nor
// gone (/proc/<pid>/stat: running, sleeping or in the disk wait).
func (t *Transport) Runnable(r ranks.Rank) bool {
	if int64(r) >= int64(len(t.procs)) {
		return false
	}
	pr := t.procs[r].Load()
	return pr != nil && pr.runnable()
}

// HeartbeatDest implements transport.Datagrams for an inner transport
// that does: the path to a rank whose region is not mapped.
func (t *Transport) HeartbeatDest(to ranks.Rank) (fd int, addr []byte, ok bool) {
	if d, ok := t.inner.(transport.Datagrams); ok {
		return d.HeartbeatDest(to)
	}
	return -1, nil, false
}

// HeartbeatSigner implements transport.Datagrams for an inner transport
// that does (nil otherwise).
func (t *Transport) HeartbeatSigner() func(dst []byte, to ranks.Rank, seq uint64) int {
	if d, ok := t.inner.(transport.Datagrams); ok {
		return d.HeartbeatSigner()
	}
	return nil
}

// HeartbeatFD implements transport.HeartbeatFD for an inner transport
// that does (-1 otherwise).
func (t *Transport) HeartbeatFD() int {
	if f, ok := t.inner.(transport.HeartbeatFD); ok {
		return f.HeartbeatFD()
	}
	return -1
}

// WatchHeartbeats implements transport.HeartbeatLanes for an inner
// transport that does (nothing otherwise).
func (t *Transport) WatchHeartbeats(from ranks.Rank) {
	if l, ok := t.inner.(transport.HeartbeatLanes); ok {
		l.WatchHeartbeats(from)
	}
}

// HeartbeatLaneDrops implements transport.LaneDrops for an inner
// transport that does (0 otherwise).
func (t *Transport) HeartbeatLaneDrops() uint64 {
	if l, ok := t.inner.(transport.LaneDrops); ok {
		return l.HeartbeatLaneDrops()
	}
	return 0
}

// HeartbeatSweepFD implements transport.HeartbeatLanes for an inner
// transport that does (-1 otherwise).
func (t *Transport) HeartbeatSweepFD() int {
	if l, ok := t.inner.(transport.HeartbeatLanes); ok {
		return l.HeartbeatSweepFD()
	}
	return -1
}

// SweepHeartbeats implements transport.HeartbeatLanes for an inner
// transport that does (nothing otherwise).
func (t *Transport) SweepHeartbeats() {
	if l, ok := t.inner.(transport.HeartbeatLanes); ok {
		l.SweepHeartbeats()
	}
}

// SetHeartbeatRebind implements transport.HeartbeatLanes for an inner
// transport that does (nothing otherwise).
func (t *Transport) SetHeartbeatRebind(f func(ranks.Rank)) {
	if l, ok := t.inner.(transport.HeartbeatLanes); ok {
		l.SetHeartbeatRebind(f)
	}
}

// HeartbeatExpected implements transport.HeartbeatVerifier for an inner
// transport that does (nothing otherwise).
func (t *Transport) HeartbeatExpected(from ranks.Rank, inc uint64) (func(dst []byte, seq uint64) int, int, *uint64) {
	if v, ok := t.inner.(transport.HeartbeatVerifier); ok {
		return v.HeartbeatExpected(from, inc)
	}
	return nil, 0, nil
}

// HeartbeatDatagram implements transport.HeartbeatVerifier for an inner
// transport that does (false otherwise).
func (t *Transport) HeartbeatDatagram(b []byte) (ranks.Rank, uint64, bool) {
	if v, ok := t.inner.(transport.HeartbeatVerifier); ok {
		return v.HeartbeatDatagram(b)
	}
	return 0, 0, false
}

// Mapped reports whether heartbeats to rank r go through shared memory.
func (t *Transport) Mapped(r ranks.Rank) bool {
	return int64(r) < int64(len(t.maps)) && t.maps[r].Load() != nil
}

// Stats implements transport.Transport: the inner transport's counters,
// with the heartbeats stored in shared memory counted as sent.
func (t *Transport) Stats() transport.Stats {
	s := t.inner.Stats()
	s.HeartbeatsSent += t.stored.Load()
	return s
}

// Close implements transport.Transport: it waits for attaches under way
// and closes the inner transport. Mapped regions stay mapped until the
// process exits (the emitter thread may still be storing).
func (t *Transport) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
	return t.inner.Close()
}

// maybeAttach starts a background attach to rank r unless one is running,
// is backing off, or the transport is closed. It does not block: the
// emitter thread calls it.
func (t *Transport) maybeAttach(r ranks.Rank) {
	if !t.mu.TryLock() {
		return
	}
	defer t.mu.Unlock()
	t.attachLocked(r)
}

// attachLocked is maybeAttach with t.mu held.
func (t *Transport) attachLocked(r ranks.Rank) {
	if t.closed || t.pending[r] || time.Now().Before(t.retryAt[r]) {
		return
	}
	t.pending[r] = true
	t.wg.Add(1)
	go t.attach(r)
}

func (t *Transport) attach(r ranks.Rank) {
	defer t.wg.Done()
	if err := t.attachNow(r, attachTimeout, true); err != nil {
		t.log.Debug("shm: heartbeats to this rank stay on the network", "rank", t.p.Rank, "peer", r, "err", err)
		return
	}
	t.log.Debug("shm: heartbeats to this rank go through shared memory", "rank", t.p.Rank, "peer", r)
}

// attachNow maps r's region, waiting up to timeout, for a caller that set
// pending[r]; it clears it and, on a failure with backoff, spaces out the
// next attach in the background.
func (t *Transport) attachNow(r ranks.Rank, timeout time.Duration, backoff bool) error {
	s, pid, err := attachRegion(t.p, r, timeout)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending[r] = false
	if err != nil {
		if backoff {
			t.backoff[r] = min(max(2*t.backoff[r], minRetry), maxRetry)
			t.retryAt[r] = time.Now().Add(t.backoff[r])
		}
		return err
	}
	if pr, ok := identify(pid); ok {
		t.procs[r].Store(&pr)
	}
	t.maps[r].Store(s)
	return nil
}

// Warm implements transport.Warmer: it maps the regions of rs not mapped
// yet, one after the other, waiting up to timeout for each rank (a rank on
// another host, with no socket here, fails at once). An attach already
// under way in the background (the heartbeat thread's, or a life word's)
// is waited for, and made again if it failed.
func (t *Transport) Warm(timeout time.Duration, rs ...ranks.Rank) int {
	n := 0
	for _, r := range rs {
		if int64(r) >= int64(len(t.maps)) || r == t.p.Rank {
			continue
		}
		if t.warm(r, time.Now().Add(timeout)) {
			n++
		}
	}
	return n
}

// warm is Warm for one rank, by deadline.
func (t *Transport) warm(r ranks.Rank, deadline time.Time) bool {
	for t.maps[r].Load() == nil && t.isPending(r) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // the background attach's result first
	}
	if t.maps[r].Load() != nil {
		return true
	}
	t.mu.Lock()
	if t.closed || t.pending[r] || !time.Now().Before(deadline) {
		t.mu.Unlock()
		return false
	}
	t.pending[r] = true
	t.mu.Unlock()
	if err := t.attachNow(r, time.Until(deadline), false); err != nil {
		t.log.Debug("shm: warm-up: heartbeats to this rank stay on the network", "rank", t.p.Rank, "peer", r, "err", err)
		return false
	}
	return true
}

// isPending reports whether an attach of r is under way.
func (t *Transport) isPending(r ranks.Rank) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending[r]
}

// Attach maps the region of rank r of the job p describes: it connects to
// r's socket, checks that r runs under this user and that its frame is
// authentic under the job key, and maps the memfd it sends. It fails when
// r is not on this host (in this network namespace) or not up.
func Attach(p wire.Params, r ranks.Rank) (*transport.Slots, error) {
	s, _, err := attachRegion(p, r, attachTimeout)
	return s, err
}

// attachTimeout bounds an attach's wait for the rank's answer: long, since
// an answer given after the attach gave up is lost work on both sides (a
// loaded host, 512 agents starting on 2 cores, answers in seconds).
const attachTimeout = 10 * time.Second

// attachRegion is Attach, waiting up to timeout for r's answer, and also
// returning the process id of r's agent as this process sees it (0 from
// another PID namespace).
func attachRegion(p wire.Params, r ranks.Rank, timeout time.Duration) (*transport.Slots, int32, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socketName(p.JobID, r), Net: "unix"})
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	uid, pid, err := peerUID(c)
	if err != nil {
		return nil, 0, err
	}
	if uid != uint32(os.Getuid()) {
		return nil, 0, fmt.Errorf("shm: rank %d's socket is served by uid %d, not %d", r, uid, os.Getuid())
	}
	buf := make([]byte, 256)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, 0, fmt.Errorf("shm: reading rank %d's region: %w", r, err)
	}
	fd, err := receivedFd(oob[:oobn])
	if err != nil {
		return nil, 0, fmt.Errorf("shm: rank %d: %w", r, err)
	}
	words, err := checkHello(p, r, buf[:n])
	if err != nil {
		unix.Close(fd)
		return nil, 0, err
	}
	size := (words*8 + os.Getpagesize() - 1) &^ (os.Getpagesize() - 1)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Size < int64(size) {
		unix.Close(fd)
		return nil, 0, fmt.Errorf("shm: rank %d's region is smaller than its %d words", r, words)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fd)
	if err != nil {
		return nil, 0, fmt.Errorf("shm: mapping rank %d's region: %w", r, err)
	}
	return transport.SlotsOver(unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), words)), pid, nil
}

// receivedFd returns the single descriptor carried by oob.
func receivedFd(oob []byte) (int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("no descriptor received (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("want one descriptor, got %d (%v)", len(fds), err)
	}
	return fds[0], nil
}

// checkHello verifies the region's frame: authentic under the job key,
// from rank r, announcing p.N words. It returns the number of words.
func checkHello(p wire.Params, r ranks.Rank, b []byte) (int, error) {
	q := p
	q.Rank, q.MaxPayload = 0, helloMax // the codec's own rank plays no part in decoding
	f, n, err := wire.NewCodec(q).Decode(b)
	if err != nil {
		return 0, fmt.Errorf("shm: rank %d's region: %w", r, err)
	}
	if n != len(b) || f.Type != wire.Msg || f.Sender != r || !bytes.HasPrefix(f.Payload, []byte(helloPayload)) ||
		len(f.Payload) != len(helloPayload)+4 {
		return 0, fmt.Errorf("shm: rank %d's region sent an unexpected frame (type %v, sender %d, %d bytes)", r, f.Type, f.Sender, len(f.Payload))
	}
	words := int(binary.LittleEndian.Uint32(f.Payload[len(helloPayload):]))
	if words != p.N {
		return 0, fmt.Errorf("shm: rank %d's region has %d words, the job %d ranks", r, words, p.N)
	}
	return words, nil
}

var (
	_ transport.Transport = (*Transport)(nil)
	_ transport.Drainer   = (*Transport)(nil)
	_ transport.LifeWords = (*Transport)(nil)
)
