package verbs

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
)

// startAll starts the opened transports with recording handlers.
func startAll(t *testing.T, ts []*Transport) []*received {
	t.Helper()
	recs := make([]*received, len(ts))
	addrs := addrsOf(ts)
	for i, tr := range ts {
		recs[i] = &received{msgs: map[ranks.Rank][]string{}, ch: make(chan struct{}, 1)}
		if err := tr.Start(addrs, recs[i].handler); err != nil {
			t.Fatalf("Start rank %d: %v", i, err)
		}
	}
	return recs
}

// Setting up a heartbeat link (QP creation, connection, window bind) runs
// on the link worker, not on the progress engine: while the observer's end
// takes setupStall to make, messages to the observer from a third rank
// arrive as fast as without it. With the set-up on the engine every one of
// them waited for it.
func TestLinkSetupDoesNotStallMessages(t *testing.T) {
	const setupStall = 800 * time.Millisecond
	ts := openAll(t, 3, 43)
	e, o, m := ts[0], ts[1], ts[2]
	o.lk.slowSetup = setupStall // before Start: the link worker reads it
	recs := startAll(t, ts)

	// Warm the message path m → o (address handles) before timing it.
	if err := m.Send(1, []byte("warm")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "warm-up message", func() bool { return len(recs[1].get(2)) == 1 })

	// Messages m → o, one at a time, for a window that covers the set-up;
	// the link is asked for once the first few went through.
	var lat []stallSample
	var asked time.Duration
	start := time.Now()
	for i := 0; time.Since(start) < 2*setupStall; i++ {
		if i == 5 {
			asked = time.Since(start)
			if err := e.SendHeartbeat(1, 1); err != nil { // asks for a link to o
				t.Fatal(err)
			}
		}
		t0 := time.Now()
		if err := m.Send(1, fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "message during the set-up", func() bool { return len(recs[1].get(2)) == i+2 })
		lat = append(lat, stallSample{t0.Sub(start), time.Since(t0)})
	}
	seq := uint64(1)
	waitFor(t, 20*time.Second, "link up after the stall", func() bool {
		seq++
		e.SendHeartbeat(1, seq)
		return e.VerbsStats().RCWrites > 0
	})
	up := time.Since(start)
	if up < asked+setupStall {
		t.Fatalf("link up %v after the start, asked at %v: the set-up did not stall %v", up, asked, setupStall)
	}
	median, worst := stallStats(lat)
	t.Logf("%d messages while the observer's end took %v to set up: median %v, worst %v (sent %v after the start; link asked at %v)",
		len(lat), setupStall, median, worst.took, worst.at, asked)
	if worst.took >= setupStall/4 {
		t.Errorf("a message waited %v while a link was being set up (stall %v): set-up blocks the message path", worst.took, setupStall)
	}
}

// Setting up a message link (creating its QP and connecting it, at both
// ends) runs on the link worker, not on the progress engine: while the
// slow rank's end of a message link to rank a takes setupStall per step,
// messages to the slow rank from a third rank arrive as fast as without
// it. With the set-up on the engine every one of them waited for it. The
// slow rank answers the link in one subtest (it creates and connects its
// QP in one step) and asks for it in the other (it creates its QP, then
// connects it on MSGACK: two steps). Once up, the link carries messages
// both ways without an error.
func TestMessageLinkSetupDoesNotStallMessages(t *testing.T) {
	for _, slowAsks := range []bool{false, true} {
		name := "answers"
		if slowAsks {
			name = "asks"
		}
		t.Run(name, func(t *testing.T) { messageLinkSetupStall(t, slowAsks) })
	}
}

func messageLinkSetupStall(t *testing.T, slowAsks bool) {
	const setupStall = 800 * time.Millisecond
	job := uint64(44)
	if slowAsks {
		job = 45
	}
	ts := openAll(t, 3, job)
	a, o, m := ts[0], ts[1], ts[2]
	o.lk.slowSetup = setupStall // before Start: the link worker reads it
	recs := startAll(t, ts)

	// Warm the message paths (address handles) before timing them.
	for _, s := range []struct {
		from   *Transport
		to, at ranks.Rank
	}{{m, 1, 2}, {a, 1, 0}, {o, 0, 1}} {
		if err := s.from.Send(s.to, []byte("warm")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "warm-up message", func() bool { return len(recs[s.to].get(s.at)) == 1 })
	}

	// Messages m → o, one at a time, for a window that covers the
	// set-up; the link a–o is asked for (a message above one datagram,
	// from another goroutine) once the first few went through.
	big := seqMsg(1, 8<<10)
	from, to := a, ranks.Rank(1)
	if slowAsks {
		from, to = o, 0
	}
	var lat []stallSample
	var asked, up time.Duration
	linked := func() bool { return a.VerbsStats().RCMsgLinks > 0 && o.VerbsStats().RCMsgLinks > 0 }
	sent := make(chan error, 1)
	start := time.Now()
	for i := 0; time.Since(start) < 2*setupStall; i++ {
		if i == 5 {
			asked = time.Since(start)
			go func() { sent <- from.Send(to, big) }()
		}
		t0 := time.Now()
		if err := m.Send(1, fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "message during the set-up", func() bool { return len(recs[1].get(2)) == i+2 })
		lat = append(lat, stallSample{t0.Sub(start), time.Since(t0)})
		if up == 0 && linked() {
			up = time.Since(start)
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if up == 0 {
		waitFor(t, 20*time.Second, "message link up at both ends", linked)
		up = time.Since(start)
	}
	if up < asked+setupStall {
		t.Fatalf("message link up %v after the start, asked at %v: the set-up did not stall %v", up, asked, setupStall)
	}
	median, worst := stallStats(lat)
	t.Logf("%d messages while rank 1's end of a message link took %v per step to set up: median %v, worst %v (sent %v after the start; link asked at %v, up at %v)",
		len(lat), setupStall, median, worst.took, worst.at, asked, up)
	if worst.took >= setupStall/4 {
		t.Errorf("a message waited %v while a message link was being set up (stall %v): set-up blocks the message path", worst.took, setupStall)
	}

	// The link carries messages both ways, with no error.
	waitFor(t, 20*time.Second, "the message that asked for the link", func() bool { return len(recs[to].get(1-to)) == 2 })
	for k, tr := range []*Transport{a, o} {
		peer := ranks.Rank(1 - k)
		had := len(recs[peer].get(ranks.Rank(k)))
		for i := range 3 {
			if err := tr.Send(peer, seqMsg(2+i, 8<<10)); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 20*time.Second, "messages over the link", func() bool { return len(recs[peer].get(ranks.Rank(k))) == had+3 })
	}
	for k, tr := range []*Transport{a, o} {
		peer := ranks.Rank(1 - k)
		if n := rcSent(tr, peer); n == 0 {
			t.Errorf("rank %d: no message to rank %d took the message link", k, peer)
		}
		if vs := tr.VerbsStats(); vs.RCMsgErrors != 0 || tr.Stats().MsgsDropped != 0 {
			t.Errorf("rank %d: %+v, %d dropped", k, vs, tr.Stats().MsgsDropped)
		}
	}
}

// The emitter thread never waits for the progress engine: with the
// engine's state held for engineHold, a UD heartbeat returns at once and
// the engine sends it when it is free.
func TestEmitterNeverWaitsForEngine(t *testing.T) {
	const engineHold = 500 * time.Millisecond
	ts, _ := cluster(t, 2)
	e, o := ts[0], ts[1]
	held := make(chan struct{})
	go e.do(func(st *state) { close(held); time.Sleep(engineHold) })
	<-held
	t0 := time.Now()
	if err := e.SendHeartbeat(1, 7); err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	if took > engineHold/10 {
		t.Errorf("SendHeartbeat took %v while the engine was busy for %v: the emitter waited", took, engineHold)
	}
	waitFor(t, 10*time.Second, "heartbeat delivered once the engine is free", func() bool { return o.Slots().Load(0) == 7 })
	t.Logf("SendHeartbeat returned in %v; delivered after %v", took, time.Since(t0))
}

// stallSample is one message sent while a link was being set up: when,
// after the start, and how long it took to arrive.
type stallSample struct {
	at, took time.Duration
}

// stallStats returns the median time of the samples and the slowest one.
func stallStats(lat []stallSample) (time.Duration, stallSample) {
	took := make([]time.Duration, len(lat))
	worst := lat[0]
	for i, s := range lat {
		took[i] = s.took
		if s.took > worst.took {
			worst = s
		}
	}
	slices.Sort(took)
	return took[len(took)/2], worst
}

// A holder of t.mu never waits for the link worker: jobs the full queue
// cannot take wait in the state, behind each other, and reach the worker
// in the order they were offloaded as it makes room; Close's drain runs
// the queue, then what is still deferred. No device needed.
func TestOffloadDefersWhenFull(t *testing.T) {
	tr := &Transport{lk: linker{jobs: make(chan func(), 2)}}
	st := &state{Transport: tr}
	var ran []int
	job := func(i int) func() { return func() { ran = append(ran, i) } }
	for i := range 5 {
		st.offload(job(i)) // never blocks
	}
	if len(tr.lk.jobs) != 2 || len(st.deferred) != 3 {
		t.Fatalf("queue %d, deferred %d; want 2 and 3", len(tr.lk.jobs), len(st.deferred))
	}
	(<-tr.lk.jobs)() // the worker takes one
	st.offload(job(5))
	if len(st.deferred) != 4 {
		t.Fatalf("a job went ahead of %d deferred ones", len(st.deferred)-1)
	}
	st.flushDeferred() // one place free
	if len(tr.lk.jobs) != 2 || len(st.deferred) != 3 {
		t.Fatalf("after the flush: queue %d, deferred %d; want 2 and 3", len(tr.lk.jobs), len(st.deferred))
	}
	st.drainLinker()
	if want := []int{0, 1, 2, 3, 4, 5}; !slices.Equal(ran, want) {
		t.Fatalf("jobs ran in the order %v, want %v", ran, want)
	}
	if len(st.deferred) != 0 || len(tr.lk.jobs) != 0 {
		t.Fatalf("left after the drain: queue %d, deferred %d", len(tr.lk.jobs), len(st.deferred))
	}
}
