package heartbeat

// #cgo CFLAGS: -O2 -Wall
// #cgo LDFLAGS: -lpthread
// #include <stdlib.h>
// #include "native.h"
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// Sink is how the native thread reaches an observer without entering Go:
// one store into Word (the observer's slot word for this rank, mapped into
// this process), or one datagram on socket FD to Addr (a kernel sockaddr),
// signed in advance by EmitterConfig.Sign. Word and the socket must stay
// valid while the Emitter runs.
type Sink struct {
	Word *uint64
	FD   int
	Addr []byte
}

// SinkFunc resolves the Sink for a heartbeat to rank to; false while to is
// reached only through the SendFunc.
type SinkFunc func(to ranks.Rank) (Sink, bool)

// SignFunc writes the authenticated datagram of heartbeat seq to rank to
// into dst and returns its length. It is called from one goroutine at a
// time, never concurrently with itself.
type SignFunc func(dst []byte, to ranks.Rank, seq uint64) int

// native is the state of an Emitter whose thread runs in C (native.c): a
// pthread the Go runtime never schedules, which sleeps on absolute
// deadlines (ppoll on the eventfd), stores each heartbeat into the
// observer's word or sends a datagram signed in advance, and runs the
// Watch's check in C every CheckEvery periods. It never enters Go: a
// heartbeat to a target without a Sink, or one Go has not signed yet, is
// handed to a goroutine that sends it through the SendFunc (sendHanded;
// the thread runs on meanwhile, its life word with it, however long a
// starved Go runtime takes). Goroutines woken through eventfds in the
// network poller do the rest: one sends those heartbeats; one signs the
// datagrams of the next VG_RING heartbeats when half of them are used (at
// h = 1 ms about twice a second); the drainer collects the heartbeats
// waiting in DrainFD (Drain) and then runs the check in the thread's place,
// at the checks that find some; one rings the Watch's alarm. With
// EmitterConfig.Verify the thread receives those heartbeats itself and
// accepts the ones equal to frames computed in advance (verifier): the
// drainer then runs only for the datagrams it did not expect.
type native struct {
	e      *Emitter      // its configuration: Sink, Sign, Watch, Drain, Verify
	c      *C.vg_emitter // C memory
	handle cgo.Handle
	vf     *verifier // nil without Verify

	fillMu  sync.Mutex // one fill at a time: the refill goroutine, publish
	ringTo  uint32     // the receiver the ring is signed for; fillMu
	refillF *os.File   // the thread's signal that a ring runs low
	drain   *os.File   // the thread's signal that heartbeats wait in DrainFD
	alarm   *os.File   // the thread's signal that the watch's alarm is due
	send    *os.File   // the thread's signal that it handed a heartbeat to Go
	wg      sync.WaitGroup

	// Guarded by the Emitter's mu: the published target, and the timer
	// that resolves its sink again while it is not a word.
	to       uint32
	kind     C.int
	resolve  *time.Timer
	interval time.Duration
}

// Re-resolving a sink that is not a word (a datagram, or none): first
// resolveFirst after the target was published, then at intervals doubling
// up to resolveMax. It is how a shared-memory region mapped since (the
// attach runs in the background) replaces the datagrams.
const (
	resolveFirst = time.Second
	resolveMax   = 64 * time.Second
)

// grid is the first heartbeat deadline after now on this process's grid
// (vg_grid, native.h), for the Go thread as for the native one.
func grid(now, h int64) int64 { return int64(C.vg_grid(C.int64_t(now), C.int64_t(h))) }

func (e *Emitter) startNative() error {
	c := (*C.vg_emitter)(C.calloc(1, C.sizeof_vg_emitter))
	if c == nil {
		return errors.New("heartbeat: out of memory for the native thread")
	}
	c.period = C.int64_t(e.cfg.Period)
	c.efd = C.int(e.efd)
	c.cpu = C.int(e.cfg.CPU)
	if e.cfg.RealTime {
		c.priority = C.int(max(1, e.cfg.Priority))
	}
	c.check_every = C.int(e.cfg.CheckEvery)
	c.life = (*C.uint64_t)(unsafe.Pointer(e.cfg.Life))
	if e.cfg.Watch != nil {
		c.watch = e.cfg.Watch.c
	}
	switch {
	case e.cfg.Drain == nil:
		c.drain_fd = -1
	case e.cfg.DrainFD > 0:
		c.drain_fd = C.int(e.cfg.DrainFD)
	default:
		c.drain_fd = C.VG_DRAIN_ALWAYS
	}
	c.sweep_fd = -1
	if e.cfg.Sweep != nil && e.cfg.SweepFD > 0 && c.drain_fd != -1 {
		c.sweep_fd = C.int(e.cfg.SweepFD)
	}
	c.refill_efd, c.drain_efd, c.alarm_efd, c.send_efd = -1, -1, -1, -1
	c.ring_to = C.VG_NO_TARGET
	n := &native{e: e, c: c, handle: cgo.NewHandle(e), ringTo: noTarget, to: noTarget} // the handle keeps e, its Watch and Slots alive
	if e.cfg.Verify != nil && e.cfg.Watch != nil && e.cfg.DrainFD > 0 {
		if n.vf = newVerifier(e.cfg.Verify); n.vf == nil {
			n.free()
			return errors.New("heartbeat: out of memory for the expected heartbeats")
		}
		c.verify = n.vf.c
	}
	n.publish(e.target.Load(), false)
	if err := n.start(); err != nil {
		n.stopGoroutines()
		n.free()
		return err
	}
	e.nat = n
	return nil
}

// start starts the goroutines the configuration needs, then the thread.
func (n *native) start() error {
	cfg, c := &n.e.cfg, n.c
	f, err := n.wake(&c.send_efd, "heartbeat-send", n.sendHanded)
	if n.send = f; err != nil {
		return err
	}
	if cfg.Sign != nil {
		if err := n.startSigning(); err != nil {
			return err
		}
	}
	if cfg.Sign != nil || n.vf != nil {
		f, err := n.wake(&c.refill_efd, "heartbeat-refill", n.refill)
		if n.refillF = f; err != nil {
			return err
		}
	}
	if c.drain_fd != -1 {
		f, err := n.wake(&c.drain_efd, "heartbeat-drain", n.drainAndCheck)
		if n.drain = f; err != nil {
			return err
		}
	}
	if w := cfg.Watch; w != nil && w.alarm != nil {
		f, err := n.wake(&c.alarm_efd, "heartbeat-alarm", w.alarm)
		if n.alarm = f; err != nil {
			return err
		}
	}
	if rc := C.vg_emitter_start(c); rc != 0 {
		return fmt.Errorf("heartbeat: pthread_create: %w", syscall.Errno(rc))
	}
	return nil
}

// startSigning signs the first ring of datagrams and starts the goroutine
// that signs the next ones.
func (n *native) startSigning() error {
	n.c.frames = (*[C.VG_FRAME_MAX]C.uchar)(C.calloc(C.VG_RING, C.VG_FRAME_MAX))
	n.c.stamps = (*C.uint64_t)(C.calloc(C.VG_RING, 8))
	if n.c.frames == nil || n.c.stamps == nil {
		return errors.New("heartbeat: out of memory for the signed heartbeats")
	}
	var probe [C.VG_FRAME_MAX + 1]byte
	l := n.e.cfg.Sign(probe[:], 0, 1)
	if l <= 0 || l > C.VG_FRAME_MAX {
		return fmt.Errorf("heartbeat: a signed heartbeat of %d bytes, want 1 to %d", l, C.VG_FRAME_MAX)
	}
	n.c.frame_len = C.uint32_t(l)
	n.resign(n.to)
	return nil
}

// resign signs the ring anew for receiver to: the thread sends none of
// its frames meanwhile (ring_to), and hands its heartbeats to Go instead.
func (n *native) resign(to uint32) {
	n.fillMu.Lock()
	defer n.fillMu.Unlock()
	c := n.c
	ringTo := (*uint32)(unsafe.Pointer(&c.ring_to))
	atomic.StoreUint32(ringTo, noTarget)
	stamps := unsafe.Slice((*uint64)(unsafe.Pointer(c.stamps)), C.VG_RING)
	for i := range stamps {
		atomic.StoreUint64(&stamps[i], 0)
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.filled)), atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.seq))))
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.requested)), 0)
	n.ringTo = to
	if to == noTarget {
		return
	}
	n.fillLocked(resignFirst) // the next few first, so that the thread hands heartbeats to Go for a few µs at most
	atomic.StoreUint32(ringTo, to)
	n.fillLocked(C.VG_RING - 1)
}

// resignFirst is how many frames resign signs before the thread may use
// the ring again.
const resignFirst = 8

// refill is the refill goroutine's work: both rings, each only when it
// runs low.
func (n *native) refill() {
	if n.c.frames != nil {
		n.fill()
	}
	if n.vf != nil {
		n.vf.refill()
	}
}

// drainAndCheck is the drainer: it checks the datagrams the thread did
// not expect (with Verify), collects the heartbeats waiting in DrainFD and
// checks in the thread's place, when the thread asked for it (the thread
// signals only with a Watch). When the watched emitter's heartbeats were
// among those datagrams, the verify ring follows that emitter.
func (n *native) drainAndCheck() {
	pending := (*uint32)(unsafe.Pointer(&n.c.drain_pending))
	sweep := (*uint32)(unsafe.Pointer(&n.c.sweep_pending))
	if atomic.LoadUint32(pending) == 0 {
		if atomic.LoadUint32(sweep) != 0 {
			n.e.cfg.Sweep() // the thread checks meanwhile: the emitter is heard
			atomic.StoreUint32(sweep, 0)
		}
		return
	}
	var from ranks.Rank
	var inc uint64
	follow := false
	if n.vf != nil {
		from, inc, follow = n.vf.deliver(n.e.cfg.Watch)
	}
	n.e.check() // its Drain sweeps too
	atomic.AddUint64((*uint64)(unsafe.Pointer(&n.c.checks)), 1)
	atomic.StoreUint32(sweep, 0)
	atomic.StoreUint32(pending, 0) // after the check: the thread checks again from now on
	if follow {
		n.vf.follow(from, inc) // after the check: signing a ring takes about a millisecond
	}
}

// wake creates an eventfd for the thread (stored in *efd) and a goroutine
// that runs do each time the thread signals it, until the file is closed.
func (n *native) wake(efd *C.int, name string, do func()) (*os.File, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: eventfd: %w", err)
	}
	*efd = C.int(fd)
	f := os.NewFile(uintptr(fd), name) // non-blocking: waits in the network poller
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		var b [8]byte
		for {
			if _, err := f.Read(b[:]); err != nil {
				return // closed
			}
			do()
		}
	}()
	return f, nil
}

// fill signs the datagrams of the sequence numbers the thread may use
// before the next refill: after its current one (skipping those it went
// past without datagrams) up to one ring ahead, so never the slot of the
// heartbeat it may be sending. Each frame is stamped with its sequence
// number once written: the thread sends a slot only with the right stamp.
func (n *native) fill() {
	n.fillMu.Lock()
	defer n.fillMu.Unlock()
	if n.ringTo != noTarget {
		n.fillLocked(C.VG_RING - 1)
	}
}

// fillLocked is fill with fillMu held, up to ahead frames after the
// thread's current one.
func (n *native) fillLocked(ahead uint64) {
	c := n.c
	filled := atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.filled)))
	seq := atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.seq)))
	limit := seq + ahead
	if limit <= filled {
		return
	}
	ring := unsafe.Slice((*byte)(unsafe.Pointer(c.frames)), C.VG_RING*C.VG_FRAME_MAX)
	stamps := unsafe.Slice((*uint64)(unsafe.Pointer(c.stamps)), C.VG_RING)
	sign, to := n.e.cfg.Sign, ranks.Rank(n.ringTo)
	for s := max(filled, seq) + 1; s <= limit; s++ {
		i := (s - 1) % C.VG_RING
		sign(ring[i*C.VG_FRAME_MAX:(i+1)*C.VG_FRAME_MAX], to, s)
		atomic.StoreUint64(&stamps[i], s)
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.filled)), limit)
}

// stopGoroutines stops the signing and draining goroutines and waits for
// them.
func (n *native) stopGoroutines() {
	for _, f := range []*os.File{n.send, n.refillF, n.drain, n.alarm} {
		if f != nil {
			f.Close()
		}
	}
	n.wg.Wait()
}

// publish resolves to's sink and publishes both to the thread, which
// adopts them at its next heartbeat without entering Go. While the sink is
// not a word, a timer resolves it again (a datagram with DatagramsOnly
// every resolveMax only: it can change only if the peer's address does).
// The Emitter's mu is held (or the thread not started).
func (n *native) publish(to uint32, rebind bool) {
	c := n.c
	n.store(to)
	if c.pub_sink.kind == C.VG_SINK_DGRAM && c.frames != nil {
		n.fillMu.Lock()
		same := n.ringTo == to && n.kind == C.VG_SINK_DGRAM
		n.fillMu.Unlock()
		if same && !rebind {
			n.fill() // the ring may lag behind heartbeats sent otherwise
		} else {
			n.resign(to) // frames are bound to their receiver
		}
	}
	if to != n.to || c.pub_sink.kind != n.kind {
		n.interval = resolveFirst
	}
	if c.pub_sink.kind == C.VG_SINK_DGRAM && n.e.cfg.DatagramsOnly {
		n.interval = resolveMax
	}
	n.to, n.kind = to, c.pub_sink.kind
	if n.resolve != nil {
		n.resolve.Stop()
		n.resolve = nil
	}
	if to != noTarget && n.kind != C.VG_SINK_WORD {
		n.resolve = time.AfterFunc(n.interval, n.reresolve)
		n.interval = min(2*n.interval, resolveMax)
	}
}

// store resolves to's sink and stores both for the thread to adopt, under
// the sequence lock pub_ver. The Emitter's mu is held (or the thread not
// started).
func (n *native) store(to uint32) {
	c := n.c
	ver := (*uint64)(unsafe.Pointer(&c.pub_ver))
	v := atomic.LoadUint64(ver)
	atomic.StoreUint64(ver, v+1) // odd: the thread leaves them alone
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.pub_to)), to)
	n.e.resolveSink(&c.pub_sink, to)
	atomic.StoreUint64(ver, v+2)
}

// reresolve publishes the current target again, with its sink resolved
// anew.
func (n *native) reresolve() {
	e := n.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.nat == n {
		n.publish(n.to, false)
	}
}

// resolveSink fills a C sink with the path to rank to (none for noTarget;
// a datagram only when frames are signed).
func (e *Emitter) resolveSink(sink *C.vg_sink, to uint32) {
	var s Sink
	ok := false
	if to != noTarget {
		s, ok = e.cfg.Sink(ranks.Rank(to))
	}
	switch {
	case !ok:
		sink.kind = C.VG_SINK_NONE
	case s.Word != nil:
		sink.kind, sink.word = C.VG_SINK_WORD, (*C.uint64_t)(unsafe.Pointer(s.Word))
	case e.cfg.Sign != nil && len(s.Addr) > 0 && len(s.Addr) <= len(sink.addr):
		sink.kind, sink.fd, sink.addrlen = C.VG_SINK_DGRAM, C.int(s.FD), C.uint32_t(len(s.Addr))
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&sink.addr[0])), len(sink.addr)), s.Addr)
	default:
		sink.kind = C.VG_SINK_NONE
	}
}

// join stops the thread and waits for it, then for the goroutines. The
// Emitter's mu is not held: the thread may be in a callback.
func (n *native) join() {
	C.vg_emitter_stop(n.c)
	n.stopGoroutines()
}

// free releases the stopped thread's memory and handle.
func (n *native) free() {
	if n.resolve != nil {
		n.resolve.Stop()
	}
	n.handle.Delete()
	if n.vf != nil {
		n.vf.free()
	}
	C.free(unsafe.Pointer(n.c.frames))
	C.free(unsafe.Pointer(n.c.stamps))
	C.free(unsafe.Pointer(n.c))
}

// depart has the thread store VG_LIFE_DEPARTED into its life word from its
// next period on (Emitter.Depart).
func (n *native) depart() {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&n.c.departed)), 1)
}

// lastLate is stats' LastLateAt and LastLateNs alone.
func (n *native) lastLate() (at, ns int64) {
	return atomic.LoadInt64((*int64)(unsafe.Pointer(&n.c.late_at))), atomic.LoadInt64((*int64)(unsafe.Pointer(&n.c.late_ns)))
}

func (n *native) stats() EmitterStats {
	c := n.c
	return EmitterStats{
		Sent:       atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.sent))),
		Dropped:    atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.dropped))),
		NativeSent: atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.native_sent))),
		Errors:     atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.errs))),
		Missed:     atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.missed))),
		MaxLateNs:  atomic.LoadInt64((*int64)(unsafe.Pointer(&c.max_late))),
		LastLateAt: atomic.LoadInt64((*int64)(unsafe.Pointer(&c.late_at))),
		LastLateNs: atomic.LoadInt64((*int64)(unsafe.Pointer(&c.late_ns))),
		Checks:     atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.checks))),
		Verified:   n.vf.verified(),
		OldSeen:    n.vf.old(),
		Pinned:     atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.pinned))) != 0,
		RealTime:   atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.rt))) != 0,
		Native:     true,
	}
}

// sendHanded sends the heartbeat the thread handed to Go (a target
// without a sink: hand_to_go in native.c) through the SendFunc, and
// stores the target's sink, resolved anew, for the next ones (the
// re-resolving timer goes on as it was).
func (n *native) sendHanded() {
	c := n.c
	if atomic.SwapUint32((*uint32)(unsafe.Pointer(&c.go_pending)), 0) == 0 {
		return
	}
	to := atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.go_to)))
	seq := atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.go_seq)))
	e := n.e
	if e.cfg.Send(ranks.Rank(to), seq) != nil {
		atomic.AddUint64((*uint64)(unsafe.Pointer(&c.errs)), 1)
	} else {
		atomic.AddUint64((*uint64)(unsafe.Pointer(&c.sent)), 1)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.nat == n && n.to == to {
		n.store(to)
	}
}

// verifier is the Go side of the verify ring (C vg_verify): the frames
// of the emitter whose heartbeats Go accepted last, computed in advance
// for the sequence numbers after its word, VG_RING at a time.
type verifier struct {
	c      *C.vg_verify // C memory: the thread reads it
	verify transport.HeartbeatVerifier

	mu   sync.Mutex // one change or fill at a time: the drainer, the refill goroutine
	from uint32     // the frames' sender, noTarget before the first
	inc  uint64
	sign func(dst []byte, seq uint64) int
	word *uint64
}

func newVerifier(tv transport.HeartbeatVerifier) *verifier {
	c := (*C.vg_verify)(C.calloc(1, C.sizeof_vg_verify))
	if c == nil {
		return nil
	}
	v := &verifier{c: c, verify: tv, from: noTarget}
	c.sender = C.VG_NO_TARGET
	c.frames = (*[C.VG_FRAME_MAX]C.uchar)(C.calloc(C.VG_RING, C.VG_FRAME_MAX))
	c.stamps = (*C.uint64_t)(C.calloc(C.VG_RING, 8))
	if c.frames == nil || c.stamps == nil {
		v.free()
		return nil
	}
	return v
}

func (v *verifier) free() {
	C.free(unsafe.Pointer(v.c.frames))
	C.free(unsafe.Pointer(v.c.stamps))
	C.free(unsafe.Pointer(v.c))
}

func (v *verifier) verified() uint64 {
	if v == nil {
		return 0
	}
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&v.c.verified)))
}

func (v *verifier) old() uint64 {
	if v == nil {
		return 0
	}
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&v.c.old)))
}

// match returns the sequence number of datagram b when the thread would
// accept it, else 0.
func (v *verifier) match(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	p := C.CBytes(b)
	defer C.free(p)
	return uint64(C.vg_verify_match(v.c, (*C.uchar)(p), C.uint32_t(len(b))))
}

// deliver hands the datagrams the thread kept to the transport, and
// returns the watched emitter and its newest incarnation when the
// transport accepted heartbeats of it among them. The drainer only.
func (v *verifier) deliver(w *Watch) (ranks.Rank, uint64, bool) {
	c := v.c
	k := atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.nhand)))
	watched, watching := w.watching()
	var inc uint64
	seen := false
	for i := range min(k, C.VG_BATCH) {
		l := c.lens[i]
		if l == 0 {
			continue // the thread accepted it
		}
		b := unsafe.Slice((*byte)(unsafe.Pointer(&c.bufs[i][0])), min(l, C.VG_FRAME_MAX+1))
		if from, in, ok := v.verify.HeartbeatDatagram(b); ok && watching && from == watched {
			inc, seen = max(inc, in), true
		}
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.nhand)), 0)
	return watched, inc, seen
}

// follow makes the ring expect rank from's heartbeats of incarnation inc,
// after an authentic one that the thread did not expect: from another
// emitter, from a newer incarnation (a restart), or outside the window
// (then only the window moves). An older incarnation changes nothing.
func (v *verifier) follow(from ranks.Rank, inc uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case from == v.from && inc < v.inc:
		return
	case from != v.from || inc > v.inc:
		sign, at, word := v.verify.HeartbeatExpected(from, inc)
		if sign == nil || word == nil {
			return
		}
		var probe [C.VG_FRAME_MAX + 1]byte
		l := sign(probe[:], 1)
		if l <= 0 || l > C.VG_FRAME_MAX || at < 0 || at+8 > l {
			return
		}
		c := v.c
		ver := (*uint64)(unsafe.Pointer(&c.ver))
		atomic.AddUint64(ver, 1) // odd: the thread verifies nothing
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.sender)), from)
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.frame_len)), uint32(l))
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.seq_at)), uint32(at))
		atomic.StorePointer((*unsafe.Pointer)(unsafe.Pointer(&c.word)), unsafe.Pointer(word))
		stamps := v.stamps()
		for i := range stamps {
			atomic.StoreUint64(&stamps[i], 0)
		}
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.filled)), 0)
		atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.requested)), 0)
		atomic.AddUint64(ver, 1)
		v.from, v.inc, v.sign, v.word = from, inc, sign, word
	}
	v.fill()
}

// refill extends the window when the thread asked for it.
func (v *verifier) refill() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sign != nil {
		v.fill()
	}
}

func (v *verifier) stamps() []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(v.c.stamps)), C.VG_RING)
}

// fill computes the frames of the sequence numbers after the sender's
// word, up to one ring ahead. A slot is overwritten only for a sequence
// number VG_RING above the one it held, already below the word: its stamp
// goes to 0 first, so the thread, which reads the stamp before and after
// comparing, never accepts a frame half written. v.mu is held.
func (v *verifier) fill() {
	c := v.c
	filled := atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.filled)))
	base := atomic.LoadUint64(v.word)
	limit := base + C.VG_RING - 1
	if limit <= filled {
		return
	}
	ring := unsafe.Slice((*byte)(unsafe.Pointer(c.frames)), C.VG_RING*C.VG_FRAME_MAX)
	stamps := v.stamps()
	for s := max(filled, base) + 1; s <= limit; s++ {
		i := (s - 1) % C.VG_RING
		atomic.StoreUint64(&stamps[i], 0)
		v.sign(ring[i*C.VG_FRAME_MAX:(i+1)*C.VG_FRAME_MAX], s)
		atomic.StoreUint64(&stamps[i], s)
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.filled)), limit)
}
