package node_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/shm"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// TestSteadyStateIsQuiet: a running failure-free cluster allocates
// nothing per heartbeat period, its event loops do not wake at all while
// every emitter is heard (the checks' alarm wakes them on a silence), and
// every check runs on the heartbeat threads.
func TestSteadyStateIsQuiet(t *testing.T) {
	const n = 4
	h, δ := 2*time.Millisecond, 40*time.Millisecond
	// Early probes at δ/2 rather than the default (the third check without
	// a heartbeat, 18 ms here): on a loaded CI host under -race, heartbeat
	// threads without real-time priority fall silent for 18 ms often
	// enough that few 1 s windows go without a probe; the steady state is
	// what is measured.
	c := startCluster(t, n, node.Config{HeartbeatPeriod: h, SuspectTimeout: δ, StartGrace: δ, MendEarly: δ / 2})
	time.Sleep(300 * time.Millisecond) // past the start-up: rings settled
	checks := func() (k, sent, wakes, msgs uint64) {
		for _, nd := range c.nodes {
			st := nd.Stats()
			k, sent, wakes, msgs = k+st.Emitter.Checks, sent+st.Emitter.Sent, wakes+st.LoopWakes, msgs+st.Transport.MsgsSent
		}
		return k, sent, wakes, msgs
	}
	// A window in which a node sent a message was not steady: a heartbeat
	// late by δ/2 on a loaded host starts block mending's early probes,
	// which allocate. The allocations are counted over a window with no
	// message, the first of up to five.
	var before, after runtime.MemStats
	var c0, s0, w0, c1, s1, w1 uint64
	const window = time.Second
	quiet := false
	for try := 0; try < 5 && !quiet; try++ {
		var m0, m1 uint64
		c0, s0, w0, m0 = checks()
		runtime.ReadMemStats(&before)
		time.Sleep(window)
		runtime.ReadMemStats(&after)
		c1, s1, w1, m1 = checks()
		if quiet = m1 == m0; !quiet {
			t.Logf("window %d: %d messages sent (early probes under load): not a steady state", try+1, m1-m0)
		}
	}
	if !quiet {
		t.Fatal("no window of 1 s without a message in five: the host is too loaded for this test")
	}
	periods := float64(n) * float64(window/h)
	if a := float64(after.Mallocs-before.Mallocs) / periods; a > 0.05 {
		t.Errorf("%.3f allocations per heartbeat period per node, want none", a)
	}
	// CheckPeriod defaults to max(δ/8, h) = 5 ms: a check after every
	// third heartbeat (counted by the thread itself, so a loaded host that
	// makes it miss periods changes both counts alike).
	if k, sent := c1-c0, s1-s0; k == 0 || sent < 2*k || sent > 4*k {
		t.Errorf("%d checks for %d heartbeats on the heartbeat threads: want one every 3", k, sent)
	}
	// A false report (a host loaded beyond what δ allows) fails the test
	// first: the loops of a ring being repaired wake, and should.
	for _, nd := range c.nodes {
		if len(nd.Dead()) != 0 {
			t.Fatalf("rank %d reports %v dead in a failure-free run", nd.Rank(), nd.Dead())
		}
	}
	// Nothing to do while every emitter is heard: no message (the window
	// has none), no deadline to look at (the checks ring the alarm on a
	// silence), no housekeeping (nothing busy). At most one wake-up per
	// node in the window (25 δ); they used to wake once per δ.
	if w, most := w1-w0, uint64(n); w > most {
		t.Errorf("event loops woke %d times in %v of a steady state (at most %d: none expected)", w, window, most)
	}
}

// TestQuietLoopDetects: with the event loops asleep in a steady state
// (no wake-up at deadlines), a crash is still reported within δ plus a
// check or two: the observer's checks ring the alarm once the emitter has
// been silent for MendEarly (block mending's early probes) or, without the
// early probes, for δ, and the loop takes it from there.
func TestQuietLoopDetects(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mendProbe int
	}{{"early probes", 0}, {"no block mending", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 4
			h, δ, check := 2*time.Millisecond, 100*time.Millisecond, 10*time.Millisecond // δ: room for this shared machine's stalls
			c := startCluster(t, n, node.Config{HeartbeatPeriod: h, SuspectTimeout: δ, CheckPeriod: check, StartGrace: δ,
				MendProbe: tc.mendProbe})
			time.Sleep(300 * time.Millisecond) // past the start-up: rings settled
			wakes := func() (w uint64) {
				for _, nd := range c.nodes {
					w += nd.Stats().LoopWakes
				}
				return w
			}
			w0 := wakes()
			time.Sleep(200 * time.Millisecond)
			t.Logf("event loops woke %d times in 200 ms before the crash", wakes()-w0)
			// Rank 3 observes rank 2.
			killed := time.Now()
			c.kill(2)
			c.waitComplete(10 * time.Second)
			ev, _ := c.nodes[3].Known(2)
			lat := ev.DetectedAt.Sub(killed)
			t.Logf("rank 2 reported by rank %d %v after the crash (δ = %v, check %v)", ev.Detector, lat, δ, check)
			// δ and a check on an idle machine (101–119 ms measured). The
			// bound is room for a loaded one, where the checks' stall guard
			// re-arms SUSP-TIMEOUT each time the checking thread was held
			// up (1.28 s seen at load average 20 under -race); a loop that
			// waited for a deadline it no longer sets would report nothing
			// at all (waitComplete).
			if most := 30 * δ; ev.Detector != 3 || lat > most {
				t.Errorf("rank 2 reported by rank %d %v after the crash: want rank 3 within %v", ev.Detector, lat, most)
			}
		})
	}
}

// TestLeavingNodeSleeps: a node lingering in Leave, its heartbeats still
// going out, does not poll the checks: its ring suspects no one any more.
func TestLeavingNodeSleeps(t *testing.T) {
	h, δ := 2*time.Millisecond, 40*time.Millisecond
	c := startCluster(t, 3, node.Config{HeartbeatPeriod: h, SuspectTimeout: δ, StartGrace: δ})
	time.Sleep(300 * time.Millisecond) // past the start-up: rings settled
	const linger = 200 * time.Millisecond
	w0 := c.nodes[0].Stats().LoopWakes
	if err := c.nodes[0].Leave(context.Background(), linger); err != nil {
		t.Fatal(err)
	}
	// The requests of Leave and a message or two; polling every quarter
	// check (1.25 ms) would be 160.
	if d := c.nodes[0].Stats().LoopWakes - w0; d > 20 {
		t.Errorf("the leaving node's loop woke %d times while it lingered %v", d, linger)
	}
}

// TestEvictedNodeSleeps: a node told it was declared dead stops taking
// part, and its event loop then sleeps instead of waking for checks.
func TestEvictedNodeSleeps(t *testing.T) {
	var tr1 transport.Transport
	c := startWrapped(t, 3, node.Config{HeartbeatPeriod: 2 * time.Millisecond, SuspectTimeout: time.Second},
		func(r ranks.Rank, tr transport.Transport) transport.Transport {
			if r == 1 {
				tr1 = tr
			}
			return tr
		})
	if err := tr1.Send(0, wire.AppendMessage(nil, &wire.Evicted{Rank: 0, Live: 3})); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.nodes[0].Evicted():
	case <-time.After(10 * time.Second):
		t.Fatal("rank 0 not evicted")
	}
	time.Sleep(50 * time.Millisecond)
	w0 := c.nodes[0].Stats().LoopWakes
	time.Sleep(300 * time.Millisecond)
	if d := c.nodes[0].Stats().LoopWakes - w0; d > 5 {
		t.Fatalf("evicted node's loop woke %d times in 300 ms", d)
	}
}

// TestNativeThread: over shared memory wrapping TCP (the default on one
// host), the heartbeat threads run natively. Rank 3 offers no region, so
// heartbeats to it are UDP datagrams signed in advance and it collects
// them with the drainer; the others store into shared memory. In a
// failure-free cluster nearly every heartbeat is sent without entering
// Go, the checks run, nobody is reported, and the process allocates
// nothing per heartbeat.
func TestNativeThread(t *testing.T) {
	const n = 4
	h, δ := 2*time.Millisecond, 200*time.Millisecond
	// δ is 100 × h: what is measured is where heartbeats are sent from,
	// not how tight δ may be (threads that are not real-time under -race
	// on a loaded 2-core host stall for tens of milliseconds). The grace
	// covers a slow start-up (the window measured begins a second after
	// the start).
	c := startTCPCluster(t, n, node.Config{HeartbeatPeriod: h, SuspectTimeout: δ, StartGrace: 500 * time.Millisecond},
		func(i int, cfg *node.Config) func(*tcp.Transport) transport.Transport {
			p := wire.Params{JobID: tcpClusterJob, Key: tcpClusterKey, Rank: uint32(i), N: n}
			if i != 3 {
				region, err := shm.NewRegion(p, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { region.Close() })
				cfg.Slots = region.Slots()
			}
			return func(tr *tcp.Transport) transport.Transport { return shm.Wrap(tr, p, nil) }
		})
	time.Sleep(time.Second) // past the start-up: rings settled, regions mapped, sinks resolved
	counts := func() (sent, native, checks uint64) {
		for _, nd := range c.nodes {
			st := nd.Stats()
			if !st.Emitter.Native {
				t.Fatalf("rank %d: heartbeat thread in Go over shared memory", nd.Rank())
			}
			sent, native, checks = sent+st.Emitter.Sent, native+st.Emitter.NativeSent, checks+st.Emitter.Checks
		}
		return sent, native, checks
	}
	var before, after runtime.MemStats
	s0, n0, k0 := counts()
	runtime.ReadMemStats(&before)
	const window = time.Second
	time.Sleep(window)
	runtime.ReadMemStats(&after)
	s1, n1, k1 := counts()
	sent, native := s1-s0, n1-n0
	if sent < uint64(n*int(window/h))/2 || float64(native) < 0.95*float64(sent) {
		t.Errorf("%d heartbeats in %v, %d of them without Go: want about %d, nearly all native", sent, window, native, n*int(window/h))
	}
	if k1 == k0 {
		t.Error("no checks")
	}
	// Per heartbeat due in the window, not per heartbeat sent: what the
	// rest of the process allocates (timers, the test's own reads) goes
	// by time, and a loaded host sends fewer heartbeats in the window.
	if a := float64(after.Mallocs-before.Mallocs) / float64(n*int(window/h)); a > 0.05 {
		t.Errorf("%.3f allocations per heartbeat due, want none", a)
	}
	for _, nd := range c.nodes {
		if len(nd.Dead()) != 0 {
			t.Fatalf("rank %d reports %v dead in a failure-free run", nd.Rank(), nd.Dead())
		}
	}
	if st := c.nodes[2].Stats(); st.Transport.HeartbeatsSent < st.Emitter.NativeSent {
		t.Errorf("rank 2: the node counts %d heartbeats sent, the thread sent %d without Go", st.Transport.HeartbeatsSent, st.Emitter.NativeSent)
	}
	if st := c.nodes[3].Stats(); st.Emitter.Verified == 0 || st.Transport.HeartbeatsRecv < st.Emitter.Verified {
		t.Errorf("rank 3: %d datagrams authenticated by its thread, %d counted received", st.Emitter.Verified, st.Transport.HeartbeatsRecv)
	}
}

// TestNativeThreadUDP: over UDP alone, the heartbeat threads run natively
// too: each sends datagrams signed in advance and authenticates its
// emitter's datagrams against frames computed in advance, so nearly every
// heartbeat is sent and received without Go, nobody is reported in a
// failure-free cluster, and the process allocates nothing per heartbeat.
// A killed rank is reported by all, and its observer's thread follows the
// new emitter.
func TestNativeThreadUDP(t *testing.T) {
	const n = 4
	h, δ := 2*time.Millisecond, 100*time.Millisecond // δ: room for this shared machine's stalls
	c := startTCPCluster(t, n, node.Config{HeartbeatPeriod: h, SuspectTimeout: δ, StartGrace: 500 * time.Millisecond})
	time.Sleep(time.Second) // past the start-up (and its grace): ring settled, sinks resolved
	counts := func() (sent, native, verified, recv, msgs uint64) {
		for i, nd := range c.nodes {
			if c.killed[ranks.Rank(i)] {
				continue
			}
			st := nd.Stats()
			if !st.Emitter.Native {
				t.Fatalf("rank %d: heartbeat thread in Go over UDP", nd.Rank())
			}
			sent, native = sent+st.Emitter.Sent, native+st.Emitter.NativeSent
			verified, recv = verified+st.Emitter.Verified, recv+st.Transport.HeartbeatsRecv
			msgs += st.Transport.MsgsSent
		}
		return
	}
	// As in TestSteadyStateIsQuiet, the allocations are counted over a
	// window with no message (early probes under load allocate).
	var before, after runtime.MemStats
	var s0, n0, v0, r0, s1, n1, v1, r1 uint64
	const window = time.Second
	quiet := false
	for try := 0; try < 5 && !quiet; try++ {
		var m0, m1 uint64
		s0, n0, v0, r0, m0 = counts()
		runtime.ReadMemStats(&before)
		time.Sleep(window)
		runtime.ReadMemStats(&after)
		s1, n1, v1, r1, m1 = counts()
		if quiet = m1 == m0; !quiet {
			t.Logf("window %d: %d messages sent (early probes under load): not a steady state", try+1, m1-m0)
		}
	}
	if !quiet {
		t.Fatal("no window of 1 s without a message in five: the host is too loaded for this test")
	}
	sent, native, verified, recv := s1-s0, n1-n0, v1-v0, r1-r0
	if sent < uint64(n*int(window/h))/2 || float64(native) < 0.95*float64(sent) {
		t.Errorf("%d heartbeats in %v, %d of them without Go: want about %d, nearly all native", sent, window, native, n*int(window/h))
	}
	if float64(verified) < 0.95*float64(recv) || float64(recv) < 0.9*float64(sent) {
		t.Errorf("%d heartbeats sent, %d received, %d of them authenticated by the threads: want nearly all", sent, recv, verified)
	}
	// Per heartbeat due in the window, not per heartbeat sent: what the
	// rest of the process allocates (timers, the test's own reads) goes
	// by time, and a loaded host sends fewer heartbeats in the window.
	if a := float64(after.Mallocs-before.Mallocs) / float64(n*int(window/h)); a > 0.05 {
		t.Errorf("%.3f allocations per heartbeat due, want none", a)
	}
	c.checkAccuracy()

	// Rank 2 dies; rank 3, its observer, now watches rank 1.
	c.killed[2] = true
	c.nodes[2].Close()
	c.waitComplete(5 * time.Second)
	time.Sleep(200 * time.Millisecond)
	v3 := c.nodes[3].Stats().Emitter.Verified
	time.Sleep(500 * time.Millisecond)
	if d := c.nodes[3].Stats().Emitter.Verified - v3; d < uint64(250*time.Millisecond/h) {
		t.Errorf("rank 3's thread authenticated %d heartbeats of its new emitter in 500 ms", d)
	}
	c.checkAccuracy()
}
