package heartbeat

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/internal/mono"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// SendFunc writes one heartbeat: seq made visible in rank to's slot for us.
// It runs on the emitter thread only.
type SendFunc func(to ranks.Rank, seq uint64) error

// EmitterConfig configures the heartbeat thread (task T1, and the
// observer's check when Check is set).
type EmitterConfig struct {
	// Period is h, in nanoseconds.
	Period int64
	// CPU pins the thread with sched_setaffinity when ≥ 0.
	CPU int
	// RealTime asks for SCHED_FIFO; refused without privilege, which is
	// reported by Stats().RealTime and is not an error.
	RealTime bool
	// Priority is the SCHED_FIFO priority with RealTime (1–99; 0 means 1).
	// Above 1 the emitter preempts the process's other threads when they
	// run real-time at 1 (SetProcessRealTime).
	Priority int
	// Send writes one heartbeat.
	Send SendFunc
	// Watch, if set, is the observer's check, run on the thread after the
	// heartbeat of every CheckEvery-th period (default 1), after Drain (if
	// set) has collected the heartbeats waiting in the transport: checking
	// costs no wake-up of its own.
	Watch      *Watch
	Drain      func()
	CheckEvery int
	// Sink, if set, runs the thread natively: in C, outside the Go
	// runtime. A heartbeat to a target with a Sink is one store or one
	// datagram signed in advance by Sign; others go through Send. With
	// the native thread, Drain and the check that follows it run on a
	// goroutine at the checks that find data waiting in the socket DrainFD
	// (if > 0; at every check otherwise), and the thread checks by itself
	// at the others. HoldP does not apply.
	Sink    SinkFunc
	Sign    SignFunc
	DrainFD int
	// Verify, with the native thread, a Watch and DrainFD > 0, makes the
	// thread receive the datagrams waiting in DrainFD itself at each check
	// (recvmmsg) and accept those equal to the frames Verify computes in
	// advance for the emitter that sent the last ones Go accepted; any
	// other datagram goes to Verify.HeartbeatDatagram on the drainer,
	// followed by Drain and that check. Go then sees only the datagrams
	// the thread did not expect: a new emitter's first ones, another
	// sender's, a forgery.
	Verify transport.HeartbeatVerifier
	// Sweep, with the native thread and DrainFD > 0, drains within a
	// bounded budget the socket SweepFD of the other datagrams of the
	// transport's port (transport.HeartbeatLanes): the thread then looks
	// at SweepFD too, but while the watched emitter is heard it has Sweep
	// run on the drainer and checks at once, never waiting for it.
	Sweep   func()
	SweepFD int
	// DatagramsOnly tells the native thread that Sink never resolves a
	// word (no shared memory): a target reached by datagram is then
	// resolved again only every 64 s (for a changed address), not within
	// seconds as while a shared-memory region may be mapped.
	DatagramsOnly bool
	// HoldP makes the thread sleep with a raw system call that keeps its Go
	// scheduler P. Without it, a SCHED_FIFO thread returning from its sleep
	// may wait for a P held by a starved normal-priority thread: a priority
	// inversion that made heartbeats 160 ms late under CPU burners. It costs
	// one P for the emitter's lifetime (the node raises GOMAXPROCS by one).
	HoldP bool
	// Life, if set, is this rank's life word: the thread stores the time
	// of each period into it (CLOCK_MONOTONIC, in nanoseconds), with or
	// without an observer. It lets a rank that maps this rank's memory
	// (its slot array: transport.Slots.Word of its own rank) see, with one
	// load, when the heartbeat thread last ran, without a message
	// (hb.Ring.Life). It must not be Go memory: the native thread stores
	// into it.
	Life *uint64
}

// EmitterStats counts what the emitter thread did.
type EmitterStats struct {
	// Sent and Errors count the heartbeats sent and those whose send
	// failed. A heartbeat the native thread handed to Go and replaced by a
	// later one before Go sent it (only the latest counts) is in neither.
	Sent, Errors uint64
	// NativeSent counts the heartbeats the native thread sent without Go
	// (by its Sink; included in Sent, not in the transport's counters),
	// and Dropped those of them a full socket buffer dropped.
	NativeSent, Dropped uint64
	// Missed counts periods the thread woke up for more than one period
	// late (a heartbeat deadline missed: the scheduler starved it).
	Missed uint64
	// MaxLateNs is the largest wake-up lateness seen, in nanoseconds.
	MaxLateNs int64
	// LastLateAt is when the thread last woke up more than a period late
	// (CLOCK_MONOTONIC ns, 0 for never) and LastLateNs how late: the
	// thread, and most likely its process, was stopped or starved that
	// long.
	LastLateAt, LastLateNs int64
	// Checks counts the observer's checks run on the thread.
	Checks uint64
	// Verified counts the heartbeat datagrams the native thread received
	// and authenticated without Go (EmitterConfig.Verify; not in the
	// transport's counters), and OldSeen those among them that did not
	// move the word (replays, or overtaken: the transports count them as
	// Rejected["old_heartbeat"]).
	Verified, OldSeen uint64
	Pinned            bool
	RealTime          bool
	// Native: the thread runs in C (EmitterConfig.Sink).
	Native bool
}

// Emitter is task T1: a dedicated, locked OS thread that sends an
// increasing sequence number to the current observer every h, on absolute
// deadlines of the monotonic clock (lateness never accumulates), and at
// once when the observer changes. Each period costs one system call to
// sleep (ppoll on an eventfd with the time left to the deadline, read on
// the vDSO clock) plus the send: the thread leaves its loop only to
// retarget or stop, which the eventfd signals. With a CheckFunc the same
// thread also runs the observer's check every few periods.
type Emitter struct {
	cfg    EmitterConfig
	target atomic.Uint32 // observer_i, or noTarget
	efd    int           // eventfd: kick / stop
	kickc  chan struct{} // the kick, for a parked thread (h ≥ ParkAbove)
	stop   atomic.Bool
	done   chan struct{}
	seq    uint64      // emitter thread only
	park   *time.Timer // the parked thread's timer (h ≥ ParkAbove)

	// Counters, written by the thread only.
	sent, errs, missed, checks atomic.Uint64
	maxLate, lateAt, lateNs    atomic.Int64
	pinned, rt                 atomic.Bool
	departed                   atomic.Bool // Depart: the life word says hb.LifeDeparted

	nat   *native      // the native thread, when EmitterConfig.Sink is set
	final EmitterStats // the native thread's counters once it stopped

	closeOnce sync.Once
	mu        sync.Mutex // guards started
	started   bool
}

const noTarget = ^uint32(0)

// ParkAbove is the heartbeat period from which the thread waits for its
// deadlines parked in the Go scheduler (a runtime timer) rather than in a
// system call. A thread in a system call keeps a P or a syscall slot that
// the runtime's monitor watches: it stays awake and preempts the thread
// about every 10 ms, several wake-ups whatever h is (≈ 1 % of a core per
// process measured at h = 1 s). Parked, the thread costs a few wake-ups per
// heartbeat and nothing between them; at short periods the system call is
// cheaper and more punctual.
const ParkAbove = 50_000_000 // 50 ms

// NewEmitter creates the thread's kernel objects; Start launches it.
func NewEmitter(cfg EmitterConfig) (*Emitter, error) {
	switch {
	case cfg.Period <= 0:
		return nil, fmt.Errorf("heartbeat: EmitterConfig.Period = %d, want > 0", cfg.Period)
	case cfg.Send == nil:
		return nil, errors.New("heartbeat: EmitterConfig.Send is nil")
	case cfg.Priority < 0 || cfg.Priority > 99:
		return nil, fmt.Errorf("heartbeat: EmitterConfig.Priority = %d, want 0–99", cfg.Priority)
	case cfg.CheckEvery < 0:
		return nil, fmt.Errorf("heartbeat: EmitterConfig.CheckEvery = %d, want ≥ 0", cfg.CheckEvery)
	}
	cfg.CheckEvery = max(1, cfg.CheckEvery)
	e := &Emitter{cfg: cfg, done: make(chan struct{}), kickc: make(chan struct{}, 1)}
	e.target.Store(noTarget)
	var err error
	if e.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("heartbeat: eventfd: %w", err)
	}
	return e, nil
}

// SetObserver retargets the heartbeats to observer and sends one at once
// (T4: observer_i ← j; HB-TIMEOUT ← 0). Safe from any goroutine.
func (e *Emitter) SetObserver(observer ranks.Rank) {
	e.setTarget(observer)
	e.kick()
}

// Pause stops heartbeating (a departing rank, or one alone).
func (e *Emitter) Pause() { e.setTarget(noTarget) }

// Depart is Pause for a rank that left the job cleanly (its LEAVE sent):
// from now on its life word says hb.LifeDeparted instead of the time of
// its periods, so that an observer on this host that reads it learns the
// departure even if the LEAVE is late or lost. It cannot be undone.
func (e *Emitter) Depart() {
	e.mu.Lock()
	e.departed.Store(true)
	if e.nat != nil {
		e.nat.depart()
	}
	e.mu.Unlock()
	if e.cfg.Life != nil {
		atomic.StoreUint64(e.cfg.Life, hb.LifeDeparted) // at once; the thread stores it again at each period
	}
	e.Pause()
}

func (e *Emitter) setTarget(to uint32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.target.Store(to)
	if e.nat != nil {
		e.nat.publish(to, false)
	}
}

// Rebind tells the thread that the heartbeats to rank to signed in
// advance are bound to an incarnation of to that is not the newest known
// any more: it signs them anew if to is its target. Safe from any
// goroutine.
func (e *Emitter) Rebind(to ranks.Rank) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.nat != nil && e.target.Load() == uint32(to) {
		e.nat.publish(uint32(to), true)
	}
}

func (e *Emitter) kick() {
	one := [8]byte{1}
	unix.Write(e.efd, one[:]) // EAGAIN only if the counter is saturated: still kicked
	select {
	case e.kickc <- struct{}{}:
	default:
	}
}

// Start launches the thread. The first heartbeat goes out at once if a
// target is set. It fails only when the native thread cannot be created.
func (e *Emitter) Start() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return nil
	}
	if e.efd < 0 {
		return errors.New("heartbeat: Start after Close")
	}
	if e.cfg.Sink != nil {
		if err := e.startNative(); err != nil {
			return err
		}
		e.started = true
		return nil
	}
	e.started = true
	ready := make(chan struct{})
	go e.run(ready)
	<-ready
	return nil
}

// Close stops the thread, waits for it and frees its kernel objects.
// Every call returns once that is done.
func (e *Emitter) Close() error {
	e.closeOnce.Do(e.close)
	return nil
}

func (e *Emitter) close() {
	e.mu.Lock()
	started := e.started
	e.mu.Unlock()
	if started && !e.stop.Swap(true) {
		e.mu.Lock()
		nat := e.nat
		e.mu.Unlock()
		if nat != nil {
			nat.join() // not under e.mu: the thread may be in a callback
			e.mu.Lock()
			e.final = nat.stats()
			e.nat = nil
			nat.free()
			e.mu.Unlock()
		} else {
			e.kick()
			<-e.done
		}
	}
	e.mu.Lock()
	if e.efd >= 0 {
		unix.Close(e.efd)
		e.efd = -1
	}
	e.mu.Unlock()
}

// Stats returns a snapshot of the thread's counters.
func (e *Emitter) Stats() EmitterStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.nat != nil:
		return e.nat.stats()
	case e.final.Native:
		return e.final
	}
	return EmitterStats{
		Sent: e.sent.Load(), Errors: e.errs.Load(), Missed: e.missed.Load(),
		MaxLateNs: e.maxLate.Load(), Checks: e.checks.Load(),
		LastLateAt: e.lateAt.Load(), LastLateNs: e.lateNs.Load(),
		Pinned: e.pinned.Load(), RealTime: e.rt.Load(),
	}
}

// LastLate returns Stats' LastLateAt and LastLateNs, with two loads
// instead of a snapshot of every counter (the node's loop reads it at
// every turn).
func (e *Emitter) LastLate() (at, ns int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.nat != nil:
		return e.nat.lastLate()
	case e.final.Native:
		return e.final.LastLateAt, e.final.LastLateNs
	}
	return e.lateAt.Load(), e.lateNs.Load()
}

func (e *Emitter) run(ready chan<- struct{}) {
	runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
	defer close(e.done)
	if e.cfg.CPU >= 0 {
		var set unix.CPUSet
		set.Set(e.cfg.CPU)
		e.pinned.Store(unix.SchedSetaffinity(0, &set) == nil)
	}
	if e.cfg.RealTime {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedFIFO, Priority: uint32(max(1, e.cfg.Priority))}
		e.rt.Store(unix.SchedSetAttr(0, &attr, 0) == nil)
	}
	h := e.cfg.Period
	next := grid(mono.Now(), h)
	if h >= ParkAbove {
		e.park = time.NewTimer(time.Duration(h))
		defer e.park.Stop()
	}
	close(ready)

	e.beat() // first heartbeat at once
	var buf [8]byte
	period := 0
	for {
		now := mono.Now()
		if now < next {
			if e.sleep(next-now) > 0 { // kicked: retarget or stop
				unix.Read(e.efd, buf[:])
				if e.stop.Load() {
					return
				}
				e.beat()
			}
			continue // EINTR, kick or timer: look at the clock again
		}
		late := now - next
		if late > e.maxLate.Load() {
			e.maxLate.Store(late)
		}
		if late > h {
			e.missed.Add(1)
			e.lateNs.Store(late)
			e.lateAt.Store(now)
			next += (late / h) * h // skip the periods slept through; stay on the grid
		}
		next += h
		if e.stop.Load() {
			return
		}
		e.beat()
		if period++; e.cfg.Watch != nil && period >= e.cfg.CheckEvery {
			period = 0
			e.check()
			e.checks.Add(1)
		}
	}
}

// check is the observer's check: Drain collects the heartbeats waiting in
// the transport, then the Watch checks. The Go thread and the native
// thread's drainer run it; Watch is set.
func (e *Emitter) check() {
	if e.cfg.Drain != nil {
		e.cfg.Drain()
	}
	e.cfg.Watch.Check(mono.Now())
}

// beat raises the life word and sends the next sequence number to the
// current target.
func (e *Emitter) beat() {
	if e.cfg.Life != nil {
		w := uint64(mono.Now())
		if e.departed.Load() {
			w = hb.LifeDeparted
		}
		atomic.StoreUint64(e.cfg.Life, w)
	}
	to := e.target.Load()
	if to == noTarget {
		return
	}
	e.seq++
	if e.cfg.Send(to, e.seq) != nil {
		e.errs.Add(1)
		return
	}
	e.sent.Add(1)
}

// sleep waits up to d nanoseconds for the eventfd: it returns > 0 when the
// eventfd was signalled, 0 on time-out and < 0 on EINTR.
func (e *Emitter) sleep(d int64) int {
	if e.park != nil {
		e.park.Reset(time.Duration(d))
		select {
		case <-e.park.C:
			return 0
		case <-e.kickc:
			return 1
		}
	}
	fds := [1]unix.PollFd{{Fd: int32(e.efd), Events: unix.POLLIN}}
	ts := unix.NsecToTimespec(d)
	var r uintptr
	var errno unix.Errno
	if e.cfg.HoldP {
		r, _, errno = unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1,
			uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	} else {
		r, _, errno = unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 1,
			uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	}
	if errno != 0 {
		return -1
	}
	return int(r)
}
