package verbs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	ibv "github.com/vigil-hpc/vigil/verbs"
)

// Error paths of issue #15 (item 4): a transport that can no longer carry
// messages must not stay alive but mute, and a heartbeat link whose
// observer end is gone must not lose heartbeats for longer than a few
// periods.

// A UD QP that enters the error state (moved there by hand here, as a
// local error would; no asynchronous event comes for a transition the
// process asked for) leaves the transport unable to carry a message. Its RC
// heartbeat link still works, so before the fix the rank went on
// heartbeating: never suspected, every message it sent dropped. Now it
// stops heartbeating (fail-stop): SendHeartbeat and Send fail, the failure
// is exposed, and the observer's slot word stands still.
func TestUDQPErrorStopsHeartbeats(t *testing.T) {
	ts, _ := cluster(t, 2)
	e, o := ts[0], ts[1]
	seq := linkUp(t, e, 1)
	if err := e.ud.SetError(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var hbErr error
	waitFor(t, 5*time.Second, "SendHeartbeat to fail once the UD QP is in error (the rank keeps heartbeating: alive but mute)", func() bool {
		seq++
		hbErr = e.SendHeartbeat(1, seq)
		time.Sleep(5 * time.Millisecond)
		return hbErr != nil
	})
	t.Logf("heartbeats stopped %v after the UD QP error: %v", time.Since(start).Round(time.Millisecond), hbErr)
	if err := e.Send(1, []byte("after the failure")); err == nil {
		t.Error("Send after the UD QP error: nil error")
	}
	if err := failureOf(e); err == nil || !strings.Contains(err.Error(), "UD QP") {
		t.Errorf("Failure() = %v, want the UD QP's error", err)
	}
	time.Sleep(100 * time.Millisecond) // writes posted before the failure have landed
	stuck := o.Slots().Load(0)
	for i := 0; i < 20; i++ {
		seq++
		if err := e.SendHeartbeat(1, seq); err == nil {
			t.Fatal("SendHeartbeat succeeded again after the failure")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if got := o.Slots().Load(0); got != stuck {
		t.Fatalf("the observer's slot moved from %d to %d after the emitter failed", stuck, got)
	}
	if st := e.Stats(); st.HeartbeatsDropped < 20 {
		t.Errorf("HeartbeatsDropped = %d, want ≥ 20 (every refused heartbeat)", st.HeartbeatsDropped)
	}
	t.Logf("emitter: %+v", e.VerbsStats())
}

// A fatal asynchronous event (a QP error on the UD QP, a CQ error, a
// device error) stops the heartbeats at once, as above.
func TestFatalAsyncEventsStopHeartbeats(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   func(*Transport) ibv.AsyncEvent
	}{
		{"ud_qp_fatal", func(tr *Transport) ibv.AsyncEvent {
			return ibv.AsyncEvent{Type: ibv.EventQPFatal, QPNum: tr.ud.Num()}
		}},
		{"cq_err", func(*Transport) ibv.AsyncEvent { return ibv.AsyncEvent{Type: ibv.EventCQErr} }},
		{"device_fatal", func(*Transport) ibv.AsyncEvent { return ibv.AsyncEvent{Type: ibv.EventDeviceFatal} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts, _ := cluster(t, 2)
			e := ts[0]
			seq := linkUp(t, e, 1)
			ev := c.ev(e)
			e.do(func(st *state) { st.handleAsync(ev) })
			seq++
			if err := e.SendHeartbeat(1, seq); err == nil {
				t.Fatal("SendHeartbeat after a fatal event: nil error, want the heartbeats stopped (fail-stop)")
			}
			if err := e.Send(1, []byte("m")); err == nil {
				t.Error("Send after a fatal event: nil error")
			}
			if err := failureOf(e); err == nil {
				t.Error("Failure() = nil after a fatal event")
			}
			if e.Stats().HeartbeatsDropped == 0 {
				t.Error("the refused heartbeat is not counted in HeartbeatsDropped")
			}
		})
	}
}

// End to end: 4 nodes over verbs; one rank's UD QP fails while its process
// lives on. It stops heartbeating, so its observer suspects it and every
// survivor reports it (and nothing else): the rank fails cleanly instead of
// staying alive but mute.
func TestMuteRankIsEvicted(t *testing.T) {
	const n, victim = 4, 2
	ts := openAll(t, n, 98)
	nodes := startNodes(t, ts)
	time.Sleep(5 * time.Second) // past the grace: heartbeats flow over RDMA
	for i, nd := range nodes {
		if d := nd.Dead(); len(d) != 0 {
			t.Fatalf("before the failure rank %d reports %v dead (false suspicion)", i, d)
		}
	}
	if err := ts[victim].ud.SetError(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i, nd := range nodes {
		if i == victim {
			continue
		}
		waitFor(t, 15*time.Second, fmt.Sprintf("rank %d reports the mute rank %d", i, victim), func() bool {
			_, ok := nd.Known(victim)
			return ok
		})
	}
	t.Logf("every survivor reported the mute rank %v after its UD QP failed", time.Since(start).Round(time.Millisecond))
	for i, nd := range nodes {
		if i == victim {
			continue
		}
		if d := nd.Dead(); !slices.Equal(d, []ranks.Rank{victim}) {
			t.Errorf("rank %d reports %v, want [%d]", i, d, victim)
		}
	}
	if err := failureOf(ts[victim]); err == nil {
		t.Error("the mute rank's transport does not report its failure")
	}
}

// slotWatch samples an observer's slot word for one emitter every
// millisecond and records when it changed.
type slotWatch struct {
	mu      sync.Mutex
	changes []time.Time
	stop    chan struct{}
	done    chan struct{}
}

func watchSlot(s *transport.Slots, emitter ranks.Rank) *slotWatch {
	w := &slotWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		last := s.Load(emitter)
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			if v := s.Load(emitter); v != last {
				last = v
				w.mu.Lock()
				w.changes = append(w.changes, time.Now())
				w.mu.Unlock()
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return w
}

func (w *slotWatch) close() {
	close(w.stop)
	<-w.done
}

// maxGap is the longest time in [from, to] without a change of the word.
func (w *slotWatch) maxGap(from, to time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gap time.Duration
	prev := from
	for _, c := range w.changes {
		if c.Before(from) {
			continue
		}
		if c.After(to) {
			break
		}
		gap = max(gap, c.Sub(prev))
		prev = c
	}
	return max(gap, to.Sub(prev))
}

// The observer drops its end of a heartbeat link (as its passive-link
// eviction at maxPassive or an asynchronous QP error does) while the
// emitter heartbeats every 20 ms. The emitter's RDMA writes now go
// nowhere and the device reports the failure only after its RC retries
// (≈ 0.5 s). Before the fix the heartbeats were lost all that time (and
// up to 31 more periods); now the emitter sees within a few periods that
// its writes stopped completing and sends its heartbeats as datagrams too,
// takes the write error when it comes, and links again. The observer's word
// never stands still for more than a few periods.
func TestObserverEndDroppedNoGap(t *testing.T) {
	const h = 20 * time.Millisecond
	ts, _ := cluster(t, 2)
	e, o := ts[0], ts[1]
	seq := linkUp(t, e, 1)
	w := watchSlot(o.Slots(), 0)
	defer w.close()
	beatUntil := func(until time.Time, after func()) {
		for next := time.Now(); time.Now().Before(until); {
			seq++
			e.SendHeartbeat(1, seq)
			after()
			next = next.Add(h)
			time.Sleep(time.Until(next))
		}
	}
	t0 := time.Now()
	beatUntil(t0.Add(400*time.Millisecond), func() {})
	base := w.maxGap(t0.Add(100*time.Millisecond), time.Now())

	dropped := false
	o.do(func(st *state) {
		for i, p := range st.passive {
			if p.emitter == 0 {
				st.passive = append(st.passive[:i], st.passive[i+1:]...)
				if err := st.closePassive(p); err != nil {
					t.Errorf("closing the observer's end: %v", err)
				}
				dropped = true
				break
			}
		}
	})
	if !dropped {
		t.Fatal("the observer has no end of emitter 0's link")
	}
	broke := time.Now()
	before := e.VerbsStats()
	k, firstUD, detected := 0, 0, 0
	var detectedAfter time.Duration
	beatUntil(broke.Add(1500*time.Millisecond), func() {
		k++
		st := e.VerbsStats()
		if firstUD == 0 && st.UDHeartbeats > before.UDHeartbeats {
			firstUD = k
		}
		if detected == 0 && st.RCErrors > before.RCErrors {
			detected, detectedAfter = k, time.Since(broke)
		}
	})
	waitFor(t, 10*time.Second, "a new heartbeat link", func() bool {
		seq++
		e.SendHeartbeat(1, seq)
		time.Sleep(h)
		return e.VerbsStats().LinksUp > before.LinksUp
	})
	end := time.Now()
	gap := w.maxGap(broke, end)
	after := e.VerbsStats()
	t.Logf("baseline max gap %v; after the observer dropped its end: first UD heartbeat at heartbeat %d, "+
		"write error seen at heartbeat %d (%v), max gap at the observer %v; emitter %+v (late_ud %d)",
		base.Round(time.Millisecond), firstUD, detected, detectedAfter.Round(time.Millisecond),
		gap.Round(time.Millisecond), after, lateUDOf(e))
	// The stall is noted at the 2nd heartbeat, timed at the 3rd, acted
	// on at the 4th (hbLink.stalled); one more for a completion that
	// straddled the drop.
	if firstUD == 0 || firstUD > 5 {
		t.Errorf("heartbeats went over UD only at heartbeat %d after the observer dropped its end, want ≤ 5 (periods)", firstUD)
	}
	if detected == 0 {
		t.Errorf("no RC write error seen within 1.5 s of the observer dropping its end")
	}
	if gap > 8*h {
		t.Errorf("the observer's slot word stood still for %v, want ≤ %v (8 periods; baseline %v)", gap.Round(time.Millisecond), 8*h, base.Round(time.Millisecond))
	}
	if err := failureOf(e); err != nil {
		t.Errorf("a lost heartbeat link failed the transport: %v", err)
	}
}

// A write the observer's device refuses at once (here its window over the
// emitter's word was invalidated: remote access error) is noticed at the
// next heartbeat whatever the signalling phase, and that heartbeat already
// goes over UD. Before the fix the completion was polled only while a
// signalled write (one in 32) was outstanding: the error could wait 31
// periods.
func TestRCWriteErrorSeenNextHeartbeat(t *testing.T) {
	ts, _ := cluster(t, 2)
	e, o := ts[0], ts[1]
	if !o.windows {
		t.Skip("device without type 2 memory windows")
	}
	seq := linkUp(t, e, 1)
	for i := 0; i < 3; i++ {
		seq++
		if err := e.SendHeartbeat(1, seq); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var err error = errors.New("no observer end for emitter 0")
	o.do(func(st *state) {
		for _, p := range st.passive {
			if p.emitter == 0 && p.mw != nil {
				err = p.mw.Close()
				p.mw = nil
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	before := e.VerbsStats()
	seq++
	e.SendHeartbeat(1, seq)            // refused by the observer's device
	time.Sleep(200 * time.Millisecond) // its NAK is back long before the next period
	seq++
	e.SendHeartbeat(1, seq)
	after := e.VerbsStats()
	if after.RCErrors != before.RCErrors+1 {
		t.Fatalf("RC errors %d → %d: the refused write was not noticed by the next heartbeat", before.RCErrors, after.RCErrors)
	}
	if after.UDHeartbeats == before.UDHeartbeats {
		t.Fatalf("no UD heartbeat after the refused write: %+v", after)
	}
	waitFor(t, 5*time.Second, "the observer's word to reach the last heartbeat", func() bool { return o.Slots().Load(0) >= seq })
	waitFor(t, 10*time.Second, "a new heartbeat link", func() bool {
		seq++
		e.SendHeartbeat(1, seq)
		time.Sleep(5 * time.Millisecond)
		return e.VerbsStats().LinksUp > before.LinksUp
	})
}
