package verbs

import (
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
)

// An idle progress engine sleeps until something happens: after a message
// exchange it wakes up no more during a second of silence (no periodic
// timer), and a message sent then still arrives, waking it.
func TestEngineIdleDoesNotWake(t *testing.T) {
	ts, recs := cluster(t, 2)
	exchange := func(what string) {
		t.Helper()
		if err := ts[0].Send(1, []byte(what)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-recs[1].ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not received in 10 s", what)
		}
	}
	exchange("first")
	time.Sleep(200 * time.Millisecond) // past PollFor and the acks
	w0, w1 := ts[0].Wakeups(), ts[1].Wakeups()
	time.Sleep(time.Second)
	if d0, d1 := ts[0].Wakeups()-w0, ts[1].Wakeups()-w1; d0 != 0 || d1 != 0 {
		t.Errorf("idle engines woke up %d and %d times in 1 s, want 0", d0, d1)
	}
	before := ts[1].Wakeups()
	exchange("second")
	if ts[1].Wakeups() == before {
		t.Error("the receiver's engine got a message without waking up: it was not asleep")
	}
}

// A handler that blocks holds up nothing but its own deliveries: the
// engine releases its state while the handler runs, so a Send from
// another goroutine of the same rank meanwhile is posted at once (it was
// queued behind the handler before).
func TestBlockedHandlerDoesNotHoldSends(t *testing.T) {
	ts := openAll(t, 2, 77)
	addrs := addrsOf(ts)
	got := make(chan string, 4)
	if err := ts[0].Start(addrs, func(_ ranks.Rank, p []byte) { got <- string(p) }); err != nil {
		t.Fatal(err)
	}
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	if err := ts[1].Start(addrs, func(ranks.Rank, []byte) {
		once.Do(func() {
			close(blocked)
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
		})
	}); err != nil {
		t.Fatal(err)
	}
	defer close(release)
	if err := ts[0].Send(1, []byte("block")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("rank 1's handler was not called in 10 s")
	}
	if err := ts[1].Send(0, []byte("while blocked")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m != "while blocked" {
			t.Fatalf("rank 0 got %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Send made while the rank's handler blocks was not delivered in 5 s")
	}
}
