package heartbeat_test

import (
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
// through Send until the WordFunc resolves one, and from then on Send is
// not called.
func TestNativeEmitterStoresAndRetargets(t *testing.T) {
	obs3, obs7 := transport.NewSlots(8), transport.NewSlots(8) // the observers' arrays; we are rank 2
	var mapped7 atomic.Bool
	word := func(to ranks.Rank) *uint64 {
		switch {
		case to == 3:
			return obs3.Word(2)
		case to == 7 && mapped7.Load():
			return obs7.Word(2)
		}
		return nil
	}
	rec := &recorder{got: make(chan struct{}, 1)}
	e, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: int64(time.Millisecond), CPU: -1,
		Send: rec.send, Word: word})
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
	rec.mu.Lock()
	before := len(rec.sent)
	lastSent := rec.sent[before-1].seq
	rec.mu.Unlock()
	seq7 := obs7.Load(2)
	waitUntil(t, "more stores to rank 7", func() bool { return obs7.Load(2) >= seq7+10 })
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
	if !st.Native || st.Sent < obs7.Load(2)-1 || st.Errors != 0 {
		t.Fatalf("stats %+v after %d heartbeats", st, obs7.Load(2))
	}
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
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	var drains atomic.Int32
	drain := func() { // what a transport's DrainHeartbeats does: empty the socket
		drains.Add(1)
		var b [64]byte
		for {
			if _, err := unix.Read(fds[0], b[:]); err != nil {
				return
			}
		}
	}
	e, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: int64(time.Millisecond), CPU: -1,
		Send: func(ranks.Rank, uint64) error { return nil }, Word: func(ranks.Rank) *uint64 { return nil },
		Watch: w, Drain: drain, DrainFD: fds[0], CheckEvery: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
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
