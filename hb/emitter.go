package hb

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/ranks"
)

// SendFunc writes one heartbeat: seq made visible in rank to's slot for us.
// It runs on the emitter thread only.
type SendFunc func(to ranks.Rank, seq uint64) error

// EmitterConfig configures the heartbeat thread (task T1).
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
	// run SCHED_FIFO at 1 (SetProcessFIFO).
	Priority int
	// Send writes one heartbeat.
	Send SendFunc
	// HoldP makes the thread sleep with a raw epoll_wait that keeps its Go
	// scheduler P. Without it, a SCHED_FIFO thread returning from its sleep
	// may wait for a P held by a starved normal-priority thread: a priority
	// inversion that made heartbeats 160 ms late under CPU burners. It costs
	// one P for the emitter's lifetime (the node raises GOMAXPROCS by one).
	HoldP bool
}

// EmitterStats counts what the emitter thread did.
type EmitterStats struct {
	Sent, Errors uint64
	// Missed counts periods the thread woke up for more than one period
	// late (a heartbeat deadline missed: the scheduler starved it).
	Missed uint64
	// MaxLateNs is the largest wake-up lateness seen, in nanoseconds.
	MaxLateNs int64
	Pinned    bool
	RealTime  bool
}

// Emitter is task T1: a dedicated, locked OS thread that sends an
// increasing sequence number to the current observer every h, on absolute
// deadlines of the monotonic clock (a timerfd with TFD_TIMER_ABSTIME, so
// lateness never accumulates), and at once when the observer changes.
type Emitter struct {
	cfg     EmitterConfig
	target  atomic.Uint32 // observer_i, or noTarget
	efd     int           // eventfd: kick / stop
	tfd     int           // timerfd: absolute period
	epfd    int
	stop    atomic.Bool
	done    chan struct{}
	seq     uint64 // emitter thread only
	mu      sync.Mutex
	stats   EmitterStats
	started bool
}

const noTarget = ^uint32(0)

// NewEmitter creates the thread's kernel objects; Start launches it.
func NewEmitter(cfg EmitterConfig) (*Emitter, error) {
	if cfg.Period <= 0 {
		return nil, fmt.Errorf("hb: EmitterConfig.Period = %d, want > 0", cfg.Period)
	}
	if cfg.Send == nil {
		return nil, errors.New("hb: EmitterConfig.Send is nil")
	}
	if cfg.Priority < 0 || cfg.Priority > 99 {
		return nil, fmt.Errorf("hb: EmitterConfig.Priority = %d, want 0–99", cfg.Priority)
	}
	e := &Emitter{cfg: cfg, efd: -1, tfd: -1, epfd: -1, done: make(chan struct{})}
	e.target.Store(noTarget)
	var err error
	if e.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("hb: eventfd: %w", err)
	}
	if e.tfd, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK); err != nil {
		e.closeFds()
		return nil, fmt.Errorf("hb: timerfd_create: %w", err)
	}
	if e.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		e.closeFds()
		return nil, fmt.Errorf("hb: epoll_create1: %w", err)
	}
	for _, fd := range []int{e.efd, e.tfd} {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err = unix.EpollCtl(e.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			e.closeFds()
			return nil, fmt.Errorf("hb: epoll_ctl: %w", err)
		}
	}
	return e, nil
}

func (e *Emitter) closeFds() {
	for _, fd := range []*int{&e.epfd, &e.tfd, &e.efd} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// SetObserver retargets the heartbeats to observer and sends one at once
// (T4: observer_i ← j; HB-TIMEOUT ← 0). Safe from any goroutine.
func (e *Emitter) SetObserver(observer ranks.Rank) {
	e.target.Store(observer)
	e.kick()
}

// Pause stops heartbeating (a departing rank, or one alone).
func (e *Emitter) Pause() { e.target.Store(noTarget) }

func (e *Emitter) kick() {
	one := [8]byte{1}
	unix.Write(e.efd, one[:]) // EAGAIN only if the counter is saturated: still kicked
}

// Start launches the thread. The first heartbeat goes out at once if a
// target is set.
func (e *Emitter) Start() {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return
	}
	e.started = true
	e.mu.Unlock()
	ready := make(chan struct{})
	go e.run(ready)
	<-ready
}

// Close stops the thread, waits for it and frees its kernel objects.
func (e *Emitter) Close() error {
	e.mu.Lock()
	started := e.started
	e.mu.Unlock()
	if started && !e.stop.Swap(true) {
		e.kick()
		<-e.done
	}
	e.closeFds()
	return nil
}

// Stats returns a snapshot of the thread's counters.
func (e *Emitter) Stats() EmitterStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

func (e *Emitter) run(ready chan<- struct{}) {
	runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
	defer close(e.done)
	var pinned, rt bool
	if e.cfg.CPU >= 0 {
		var set unix.CPUSet
		set.Set(e.cfg.CPU)
		pinned = unix.SchedSetaffinity(0, &set) == nil
	}
	if e.cfg.RealTime {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedFIFO, Priority: uint32(max(1, e.cfg.Priority))}
		rt = unix.SchedSetAttr(0, &attr, 0) == nil
	}
	e.mu.Lock()
	e.stats.Pinned, e.stats.RealTime = pinned, rt
	e.mu.Unlock()

	var now unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
	next := now.Nano() + e.cfg.Period
	e.arm(next)
	close(ready)

	var events [2]unix.EpollEvent
	var buf [8]byte
	var sent, errs, missed uint64
	var maxLate int64
	switch e.beat() { // first heartbeat at once
	case 1:
		sent++
	case -1:
		errs++
	}
	flush := func() {
		e.mu.Lock()
		e.stats.Sent += sent
		e.stats.Errors += errs
		e.stats.Missed += missed
		e.stats.MaxLateNs = max(e.stats.MaxLateNs, maxLate)
		e.mu.Unlock()
		sent, errs, missed, maxLate = 0, 0, 0, 0
	}
	defer flush()
	for !e.stop.Load() {
		n, err := e.wait(events[:])
		if err != nil || n <= 0 {
			continue // EINTR
		}
		timer := false
		for i := 0; i < n; i++ {
			fd := int(events[i].Fd)
			unix.Read(fd, buf[:])
			if fd == e.tfd {
				timer = true
			}
		}
		if e.stop.Load() {
			return
		}
		if timer {
			unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
			late := now.Nano() - next
			maxLate = max(maxLate, late)
			if late > e.cfg.Period {
				missed++
				// Skip the periods we slept through; stay on the grid.
				next += (late / e.cfg.Period) * e.cfg.Period
			}
			next += e.cfg.Period
			e.arm(next)
		}
		switch e.beat() {
		case 1:
			sent++
		case -1:
			errs++
		}
		flush() // an uncontended lock per heartbeat: cheap at any sane h
	}
}

// beat sends the next sequence number to the current target: 1 sent,
// -1 error, 0 no target.
func (e *Emitter) beat() int {
	to := e.target.Load()
	if to == noTarget {
		return 0
	}
	e.seq++
	if e.cfg.Send(to, e.seq) != nil {
		return -1
	}
	return 1
}

// wait blocks until the timer or a kick fires.
func (e *Emitter) wait(events []unix.EpollEvent) (int, error) {
	if !e.cfg.HoldP {
		return unix.EpollWait(e.epfd, events, -1)
	}
	r, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(e.epfd),
		uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), ^uintptr(0), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

func (e *Emitter) arm(deadline int64) {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(deadline)}
	unix.TimerfdSettime(e.tfd, unix.TFD_TIMER_ABSTIME, &spec, nil)
}
