package verbs

import (
	"testing"
	"time"
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
