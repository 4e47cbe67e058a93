package heartbeat_test

import (
	"encoding/binary"
	"os"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/internal/mono"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// waitUntil polls cond every millisecond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("native emitter: %s: not within 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNativeEmitterStoresAndRetargets: the C thread stores increasing
// sequence numbers into the target's word; a target without a word goes
// through Send (on Go's side) until the WordFunc resolves one, and from
// then on Send is not called.
func TestNativeEmitterStoresAndRetargets(t *testing.T) {
	obs3, obs7 := transport.NewSlots(8), transport.NewSlots(8) // the observers' arrays; we are rank 2
	var mapped7 atomic.Bool
	sink := func(to ranks.Rank) (heartbeat.Sink, bool) {
		switch {
		case to == 3:
			return heartbeat.Sink{Word: obs3.Word(2)}, true
		case to == 7 && mapped7.Load():
			return heartbeat.Sink{Word: obs7.Word(2)}, true
		}
		return heartbeat.Sink{}, false
	}
	rec := &recorder{got: make(chan struct{}, 1)}
	e, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: int64(time.Millisecond), CPU: -1,
		Send: rec.send, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	e.SetObserver(3)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "stores to rank 3", func() bool { return obs3.Load(2) >= 20 })
	rec.mu.Lock()
	viaSend := len(rec.sent)
	rec.mu.Unlock()
	if viaSend > 1 {
		t.Fatalf("%d heartbeats to a mapped observer went through Send (at most the first may)", viaSend)
	}

	e.SetObserver(7)
	rec.waitFor(t, func() bool { return len(rec.sent) >= viaSend+5 && rec.sent[len(rec.sent)-1].to == 7 })
	last3 := obs3.Load(2)
	mapped7.Store(true)
	waitUntil(t, "stores to rank 7 once mapped", func() bool { return obs7.Load(2) > 0 })
	seq7 := obs7.Load(2)
	waitUntil(t, "more stores to rank 7", func() bool { return obs7.Load(2) >= seq7+10 })
	// The last heartbeat handed to Go before the word was resolved has
	// been sent by now.
	rec.mu.Lock()
	before := len(rec.sent)
	lastSent := rec.sent[before-1].seq
	rec.mu.Unlock()
	waitUntil(t, "still more stores to rank 7", func() bool { return obs7.Load(2) >= seq7+20 })
	e.Pause()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.sent) != before {
		t.Fatalf("Send called %d more times after rank 7's word was resolved", len(rec.sent)-before)
	}
	if obs3.Load(2) != last3 {
		t.Fatalf("rank 3's word moved after the retarget: %d → %d", last3, obs3.Load(2))
	}
	if seq7 <= lastSent || lastSent <= last3 {
		t.Fatalf("sequence not increasing across targets: rank 3 up to %d, Send up to %d, rank 7 from %d", last3, lastSent, seq7)
	}
	st := e.Stats()
	// Sent: every store, and what Go sent of the heartbeats handed to it
	// (a later one replaces one Go has not sent yet).
	if !st.Native || st.Sent > obs7.Load(2) || st.Errors != 0 || st.NativeSent != st.Sent-uint64(len(rec.sent)) ||
		st.NativeSent < obs7.Load(2)-seq7 {
		t.Fatalf("stats %+v after %d heartbeats", st, obs7.Load(2))
	}
}

// startDrainingEmitter starts a native emitter of 1 ms period that checks
// w every checkEvery periods, with no target, and a datagram socket pair
// whose first end is its drain socket: Drain empties it, as a transport's
// DrainHeartbeats does, and counts its calls in drains; a test writes to
// fds[1]. Everything is closed when the test ends.
func startDrainingEmitter(t *testing.T, w *heartbeat.Watch, checkEvery int) (e *heartbeat.Emitter, fds [2]int, drains *atomic.Int32) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	drains = new(atomic.Int32)
	drain := func() {
		drains.Add(1)
		var b [64]byte
		for {
			if _, err := unix.Read(fds[0], b[:]); err != nil {
				return
			}
		}
	}
	e, err = heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: int64(time.Millisecond), CPU: -1,
		Send: func(ranks.Rank, uint64) error { return nil }, Sink: func(ranks.Rank) (heartbeat.Sink, bool) { return heartbeat.Sink{}, false },
		Watch: w, Drain: drain, DrainFD: fds[0], CheckEvery: checkEvery})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, fds, drains
}

// TestNativeChecksDrainAndAlarm: the C thread runs the Watch's check every
// CheckEvery periods, calls Drain only when the drain socket has data, and
// rings the Watch's alarm when the watched word stays silent.
func TestNativeChecksDrainAndAlarm(t *testing.T) {
	slots := transport.NewSlots(4)
	w := heartbeat.NewWatch(slots, 0)
	alarms := make(chan struct{}, 1)
	w.SetAlarm(int64(20*time.Millisecond), func() {
		select {
		case alarms <- struct{}{}:
		default:
		}
	})
	e, fds, drains := startDrainingEmitter(t, w, 2)
	w.Set(1, mono.Now())
	for i := range uint64(30) { // rank 1 heartbeats
		slots.Store(1, i+1)
		time.Sleep(time.Millisecond)
	}
	waitUntil(t, "a check records rank 1's heartbeats", func() bool { return w.Record().Seq >= 20 })
	if n := drains.Load(); n != 0 {
		t.Fatalf("Drain called %d times with nothing waiting", n)
	}
	if _, err := unix.Write(fds[1], []byte("hb")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a drain of the waiting datagram", func() bool { return drains.Load() >= 1 })
	select { // rank 1 fell silent after its 30 heartbeats
	case <-alarms:
	case <-time.After(10 * time.Second):
		t.Fatal("no silence alarm within 10 s")
	}
	if st := e.Stats(); st.Checks == 0 || !st.Native {
		t.Fatalf("stats %+v", st)
	}
}

// TestNativeDrainsWhileHeardBySharedMemory: while the watched emitter
// stores into its word, the checks leave the socket alone most of the time
// (VG_DRAIN_EVERY), yet a datagram waiting there is still collected, and
// the record follows the word.
func TestNativeDrainsWhileHeardBySharedMemory(t *testing.T) {
	slots := transport.NewSlots(4)
	w := heartbeat.NewWatch(slots, 0)
	_, fds, drains := startDrainingEmitter(t, w, 1)
	w.Set(1, mono.Now())
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // rank 1 heartbeats by shared memory, every 200 µs: its word grows between any two checks
		defer close(done)
		for i := uint64(1); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			slots.Store(1, i)
			time.Sleep(200 * time.Microsecond)
		}
	}()
	defer func() { close(stop); <-done }()
	waitUntil(t, "a check records rank 1's heartbeats", func() bool { return w.Record().Seq >= 20 })
	for k := range 3 {
		if _, err := unix.Write(fds[1], []byte("hb")); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "a drain of the waiting datagram", func() bool { return drains.Load() > int32(k) })
	}
	s0 := w.Record().Seq
	waitUntil(t, "the record following the word", func() bool { return w.Record().Seq > s0 })
}

// TestNativeDatagrams: with a datagram sink, the C thread sends each
// heartbeat as the frame Sign wrote for its sequence number, in order,
// across many refills of the ring, without calling Send. It starts on a
// word target for several rings' worth of heartbeats: the signing skips
// the sequence numbers it went past.
func TestNativeDatagrams(t *testing.T) {
	rx, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rx)
	if err := unix.Bind(rx, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	_ = unix.SetsockoptInt(rx, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	sa, err := unix.Getsockname(rx)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*unix.SockaddrInet4).Port
	var raw unix.RawSockaddrInet4
	raw.Family = unix.AF_INET
	raw.Port = uint16(port)<<8 | uint16(port)>>8
	raw.Addr = [4]byte{127, 0, 0, 1}
	addr := unsafe.Slice((*byte)(unsafe.Pointer(&raw)), unix.SizeofSockaddrInet4)
	tx, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tx)
	var sends, signed atomic.Int32
	sign := func(dst []byte, _ ranks.Rank, seq uint64) int { // "hb" + seq, as a transport's signed frame would carry it
		signed.Add(1)
		copy(dst, "hb")
		binary.LittleEndian.PutUint64(dst[2:], seq)
		return 10
	}
	local := transport.NewSlots(4)
	e, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: int64(200 * time.Microsecond), CPU: -1,
		Send: func(ranks.Rank, uint64) error { sends.Add(1); return nil },
		Sink: func(to ranks.Rank) (heartbeat.Sink, bool) {
			if to == 2 {
				return heartbeat.Sink{Word: local.Word(0)}, true
			}
			return heartbeat.Sink{FD: tx, Addr: addr}, true
		},
		Sign: sign})
	if err != nil {
		t.Fatal(err)
	}
	e.SetObserver(2)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "3,000 stores to the word target", func() bool { return local.Load(0) >= 3000 })
	e.SetObserver(1)
	const want = 3000 // about three refills of the ring
	var last uint64
	got := 0
	buf := make([]byte, 64)
	_ = unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 10})
	for got < want {
		n, _, err := unix.Recvfrom(rx, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("after %d datagrams: %v", got, err)
		}
		if n != 10 || string(buf[:2]) != "hb" {
			t.Fatalf("datagram %q, want a signed frame", buf[:n])
		}
		seq := binary.LittleEndian.Uint64(buf[2:])
		if got == 0 && seq <= 3000 {
			t.Fatalf("first datagram carries %d, after 3,000 stores", seq)
		}
		if seq <= last {
			t.Fatalf("sequence %d after %d", seq, last)
		}
		last = seq
		got++
	}
	e.Close()
	st := e.Stats()
	if s := uint64(sends.Load()); s+st.NativeSent != st.Sent || st.NativeSent < want+3000 {
		t.Fatalf("stats %+v with %d sends through Go", st, s)
	}
	if s := sends.Load(); s > 2 { // at most while the ring is signed anew for the new target
		t.Fatalf("%d sends through Go for %d heartbeats", s, st.Sent)
	}
	if n := signed.Load(); uint64(n) > want+3*1024 {
		t.Fatalf("%d frames signed for %d datagrams: the signing did not skip the stores' sequence numbers", n, want)
	}
}

// TestNativeNeverWaitsForGo: a heartbeat to a target without a sink goes
// through Go's SendFunc on a goroutine; while that Send is held up (a
// starved Go runtime), the thread runs on: its life word grows, and the
// heartbeats after the held one wait for it rather than pile up.
func TestNativeNeverWaitsForGo(t *testing.T) {
	var life uint64
	release := make(chan struct{})
	var calls atomic.Int64
	e, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: int64(time.Millisecond), CPU: -1, Life: &life,
		Sink: func(ranks.Rank) (heartbeat.Sink, bool) { return heartbeat.Sink{}, false },
		Send: func(ranks.Rank, uint64) error {
			if calls.Add(1) == 1 {
				<-release
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	e.SetObserver(1)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	waitUntil(t, "the first Send", func() bool { return calls.Load() == 1 })
	at := atomic.LoadUint64(&life)
	waitUntil(t, "50 periods with Send held", func() bool { return atomic.LoadUint64(&life) >= at+50 })
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d Sends while the first was held, want the others to wait for it", n)
	}
	close(release)
	waitUntil(t, "Sends after the release", func() bool { return calls.Load() >= 3 })
	if st := e.Stats(); st.Sent < 3 || st.Native != true {
		t.Fatalf("stats %+v: want ≥ 3 sent by the native thread's Go sender", st)
	}
}

// startOnRank1 starts an emitter of cfg heartbeating rank 1: its thread in
// C (heartbeats handed to cfg.Send, no sink) when native, else in Go.
func startOnRank1(t *testing.T, native bool, cfg heartbeat.EmitterConfig) *heartbeat.Emitter {
	t.Helper()
	if native {
		cfg.Sink = func(ranks.Rank) (heartbeat.Sink, bool) { return heartbeat.Sink{}, false }
	}
	e, err := heartbeat.NewEmitter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.SetObserver(1)
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestLastLateAgreesWithStats: LastLate, the loop's cheap read, gives what
// Stats does, for the native thread and the Go one, running and closed.
func TestLastLateAgreesWithStats(t *testing.T) {
	for _, native := range []bool{true, false} {
		e := startOnRank1(t, native, heartbeat.EmitterConfig{Period: int64(50 * time.Microsecond), CPU: -1,
			Send: func(ranks.Rank, uint64) error { return nil }})
		time.Sleep(100 * time.Millisecond)
		e.Close()
		st := e.Stats()
		at, ns := e.LastLate()
		if at != st.LastLateAt || ns != st.LastLateNs || st.Native != native {
			t.Fatalf("native %v: LastLate %d, %d; Stats %+v", native, at, ns, st)
		}
		if st.Missed > 0 && (at == 0 || ns <= 0) {
			t.Fatalf("native %v: %d periods missed but LastLate %d, %d", native, st.Missed, at, ns)
		}
		t.Logf("native %v: missed %d, last late at %d by %d ns", native, st.Missed, at, ns)
	}
}

// TestDepartMarksTheLifeWord: after Depart the life word says
// hb.LifeDeparted for good, for the native thread and the Go one, and no
// heartbeat goes out any more.
func TestDepartMarksTheLifeWord(t *testing.T) {
	for _, native := range []bool{true, false} {
		page, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		life := (*uint64)(unsafe.Pointer(&page[0]))
		var sent atomic.Int64
		e := startOnRank1(t, native, heartbeat.EmitterConfig{Period: int64(time.Millisecond), CPU: -1, Life: life,
			Send: func(ranks.Rank, uint64) error { sent.Add(1); return nil }})
		waitUntil(t, "heartbeats", func() bool { return sent.Load() >= 3 })
		if w := atomic.LoadUint64(life); w == 0 || w == hb.LifeDeparted {
			t.Fatalf("native %v: life word %#x before Depart, want the time of a period", native, w)
		}
		e.Depart()
		time.Sleep(5 * time.Millisecond) // a Send handed to Go before Depart may still land
		before := sent.Load()
		time.Sleep(20 * time.Millisecond)
		if w := atomic.LoadUint64(life); w != hb.LifeDeparted {
			t.Fatalf("native %v: life word %#x 20 periods after Depart, want hb.LifeDeparted", native, w)
		}
		if n := sent.Load(); n != before {
			t.Fatalf("native %v: %d heartbeats after Depart", native, n-before)
		}
		e.Close()
		unix.Munmap(page)
	}
}

// TestHeartbeatsOnTheGrid: the thread wakes on its process's grid of the
// monotonic clock (multiples of its period plus the process's slot, pid
// mod 8 eighths of h), whenever it started, so that the heartbeat threads
// of a host share their timer interrupts. Two emitters of this process
// started half a period apart both store life words (their wake-up times)
// close after an instant of the grid; without it one of them would be
// about h/2 off.
func TestHeartbeatsOnTheGrid(t *testing.T) {
	const h = int64(10 * time.Millisecond)
	for _, native := range []bool{true, false} {
		page, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		var es []*heartbeat.Emitter
		lives := []*uint64{(*uint64)(unsafe.Pointer(&page[0])), (*uint64)(unsafe.Pointer(&page[64]))}
		for _, life := range lives {
			es = append(es, startOnRank1(t, native, heartbeat.EmitterConfig{Period: h, CPU: -1, Life: life,
				Send: func(ranks.Rank, uint64) error { return nil }}))
			time.Sleep(time.Duration(h / 2))
		}
		slot := int64(os.Getpid()%8) * (h / 8)
		off := []int64{h, h} // the smallest (w − slot) mod h seen, per emitter
		seen := []uint64{atomic.LoadUint64(lives[0]), atomic.LoadUint64(lives[1])}
		for range 100 {
			time.Sleep(time.Duration(h / 4))
			for i, life := range lives {
				if w := atomic.LoadUint64(life); w != seen[i] { // a wake-up after the first beat
					seen[i] = w
					off[i] = min(off[i], ((int64(w)-slot)%h+h)%h)
				}
			}
		}
		for i, e := range es {
			e.Close()
			if off[i] > h/10 {
				t.Errorf("native %v: emitter %d woke at least %v after an instant of its grid (h = %v), want within h/10",
					native, i, time.Duration(off[i]), time.Duration(h))
			}
		}
		unix.Munmap(page)
	}
}
