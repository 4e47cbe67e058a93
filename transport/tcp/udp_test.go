package tcp

import (
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/internal/mono"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/lab/hostile"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// TestForgedDatagrams sends hand-made datagrams to rank 0's heartbeat
// socket: each is rejected with its reason at the next drain, stores
// nothing, and the honest rank 1's heartbeats keep landing.
func TestForgedDatagrams(t *testing.T) { testForgedDatagrams(t, false) }

// TestForgedDatagramsNative is TestForgedDatagrams with rank 0's native
// heartbeat thread receiving the datagrams and authenticating those of
// its emitter, rank 1, against frames computed in advance
// (heartbeat.EmitterConfig.Verify): the same datagrams are rejected and
// counted by reason, forgeries in rank 1's name and a replay of its old
// heartbeat raise nothing, and the thread verifies nearly all of rank 1's
// heartbeats itself.
func TestForgedDatagramsNative(t *testing.T) { testForgedDatagrams(t, true) }

func testForgedDatagrams(t *testing.T, native bool) {
	cl := newCluster(t, 4, 2, nil)
	defer cl.close()
	load := cl.load
	var em *heartbeat.Emitter
	if native {
		w := heartbeat.NewWatch(cl.slots[0], 0)
		var err error
		em, err = heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: int64(time.Millisecond), CPU: -1,
			Send: cl.ts[0].SendHeartbeat, Sink: func(ranks.Rank) (heartbeat.Sink, bool) { return heartbeat.Sink{}, false },
			Watch: w, Drain: cl.ts[0].DrainHeartbeats, DrainFD: cl.ts[0].HeartbeatFD(), Verify: cl.ts[0],
			Sweep: cl.ts[0].SweepHeartbeats, SweepFD: cl.ts[0].HeartbeatSweepFD()})
		if err != nil {
			t.Fatal(err)
		}
		cl.ts[0].WatchHeartbeats(1)
		w.Set(1, mono.Now())
		if err := em.Start(); err != nil {
			t.Fatal(err)
		}
		defer em.Close()
		load = func(at, from int) uint64 { return cl.slots[at].Load(ranks.Rank(from)) } // the thread drains
	}
	f := &forger{t: t, addr: cl.ts[0].Addr()}
	// Rank 2 (played here) says hello with incarnation 100 over TCP, so
	// that an older incarnation is stale.
	honest := f.codec(wire.Params{Rank: 2, Incarnation: 100})
	c, ch := f.dial()
	defer c.Close()
	hc := f.codec(wire.Params{Rank: 2, Incarnation: 100})
	hc.Bind(ch)
	if _, err := c.Write(frame(t, hc, wire.Hello, wire.AppendHello(nil, 0))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hello", func() bool { return cl.ts[0].incs.Latest(2) == 100 })

	u, err := net.Dial("udp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	inc0 := cl.ts[0].Incarnation()
	beat := func(c *wire.Codec, seq uint64) []byte {
		return frame(t, c, wire.Heartbeat, wire.AppendHeartbeat(nil, wire.Beat{To: 0, ToIncarnation: inc0, Seq: seq}))
	}
	good := beat(honest, 1<<40)
	// Rank 1's messages say hello: its older incarnations are stale.
	if err := cl.ts[1].Send(0, msg(1)); err != nil {
		t.Fatal(err)
	}
	inc1 := cl.ts[1].Incarnation()
	waitFor(t, "rank 1's hello", func() bool { return cl.ts[0].incs.Latest(1) == inc1 })
	var seq uint64
	for range 50 { // rank 1 heartbeats: the thread follows it
		seq++
		if err := cl.ts[1].SendHeartbeat(0, seq); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	waitFor(t, "rank 1's heartbeats", func() bool { return load(0, 1) == seq })
	rank1 := func(p wire.Params, seq uint64) []byte {
		p.Rank = 1
		return beat(f.codec(p), seq)
	}
	cases := []struct {
		name, reason string
		b            []byte
	}{
		{"wrong key", wire.ReasonBadTag, beat(f.codec(wire.Params{Key: []byte("not the job key at all"), Rank: 2, Incarnation: 100}), 1<<40)},
		{"foreign job", wire.ReasonForeignJob, beat(f.codec(wire.Params{JobID: testJob + 1, Rank: 2, Incarnation: 100}), 1<<40)},
		{"truncated", wire.ReasonTruncated, good[:len(good)-1]},
		{"trailing byte", wire.ReasonBadPayload, append(append([]byte(nil), good...), 0)},
		{"bad magic", wire.ReasonBadMagic, append([]byte{'X'}, good[1:]...)},
		{"message frame", wire.ReasonBadType, frame(t, honest, wire.Msg, msg(1))},
		{"unknown rank", wire.ReasonUnknownRank, beat(f.codec(wire.Params{Rank: 4, Incarnation: 100}), 1<<40)},
		{"stale incarnation", wire.ReasonStale, beat(f.codec(wire.Params{Rank: 2, Incarnation: 99}), 1<<40)},
		{"bad payload", wire.ReasonBadPayload, frame(t, honest, wire.Heartbeat, []byte{1, 2, 3})},
		{"rank 1, wrong key", wire.ReasonBadTag, rank1(wire.Params{Key: []byte("not the job key at all"), Incarnation: inc1}, 1<<40)},
		{"rank 1, next seq, wrong key", wire.ReasonBadTag, rank1(wire.Params{Key: []byte("not the job key at all"), Incarnation: inc1}, seq+2)},
		{"rank 1, stale incarnation", wire.ReasonStale, rank1(wire.Params{Incarnation: inc1 - 1}, 1<<40)},
		{"rank 1, shorter", wire.ReasonTruncated, rank1(wire.Params{Incarnation: inc1}, seq+2)[:wire.HeartbeatFrameSize-1]},
		{"rank 1, longer", wire.ReasonBadPayload, append(rank1(wire.Params{Incarnation: inc1}, seq+2), 0)},
		{"rank 1, much longer", wire.ReasonBadPayload, append(rank1(wire.Params{Incarnation: inc1}, seq+2), make([]byte, 200)...)},
		{"rank 1, replayed old heartbeat", wire.ReasonOldHeartbeat, rank1(wire.Params{Incarnation: inc1}, 3)},
		{"rank 1, to another rank", wire.ReasonWrongReceiver, frame(t, f.codec(wire.Params{Rank: 1, Incarnation: inc1}), wire.Heartbeat,
			wire.AppendHeartbeat(nil, wire.Beat{To: 3, ToIncarnation: inc0, Seq: 1 << 40}))},
		{"rank 1, to an old incarnation", wire.ReasonWrongIncarnation, frame(t, f.codec(wire.Params{Rank: 1, Incarnation: inc1}), wire.Heartbeat,
			wire.AppendHeartbeat(nil, wire.Beat{To: 0, ToIncarnation: inc0 - 1, Seq: 1 << 40}))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prev := cl.ts[0].Stats().Rejected[tc.reason]
			if _, err := u.Write(tc.b); err != nil {
				t.Fatal(err)
			}
			seq++
			if err := cl.ts[1].SendHeartbeat(0, seq); err != nil {
				t.Fatal(err)
			}
			want := seq
			waitFor(t, "rejection "+tc.reason, func() bool {
				return load(0, 1) == want && (tc.reason == "" || cl.ts[0].Stats().Rejected[tc.reason] == prev+1)
			})
			if tc.reason != "" {
				if got := cl.ts[0].Stats().Rejected[tc.reason]; got != prev+1 {
					t.Fatalf("%d rejects %q, want %d", got, tc.reason, prev+1)
				}
			}
			if got := cl.slots[0].Load(2); got != 0 {
				t.Fatalf("forged heartbeat stored: %d", got)
			}
		})
	}
	// The authentic heartbeat of rank 2 is accepted.
	if _, err := u.Write(good); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "authentic heartbeat", func() bool { return load(0, 2) == 1<<40 })
	if native {
		em.Close()
		st := em.Stats()
		if r := cl.ts[0].Stats().HeartbeatsRecv; st.Verified < seq/2 || st.Verified+r < seq+1 {
			t.Fatalf("%d heartbeats of rank 1: %d verified by the thread, %d datagrams accepted in Go", seq, st.Verified, r)
		}
	}
}

// TestHeartbeatDrainIsBounded: more heartbeats than one recvmmsg batch
// between two checks are all received, and the slot holds the largest.
func TestHeartbeatDrainIsBounded(t *testing.T) {
	cl := newCluster(t, 2, 2, nil)
	defer cl.close()
	const k = 5 * drainBatch
	for seq := uint64(1); seq <= k; seq++ {
		if err := cl.ts[0].SendHeartbeat(1, seq); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every heartbeat", func() bool { return cl.load(1, 0) == k })
	if st := cl.ts[1].Stats(); st.HeartbeatsRecv != k {
		t.Fatalf("%d heartbeats received, want %d", st.HeartbeatsRecv, k)
	}
}

// TestDrainDoesNotAllocate: the observer's drain allocates nothing.
func TestDrainDoesNotAllocate(t *testing.T) {
	cl := newCluster(t, 2, 2, nil)
	defer cl.close()
	seq := connectHeartbeat(t, cl, 0, 1)
	allocs := testing.AllocsPerRun(200, func() {
		seq++
		_ = cl.ts[0].SendHeartbeat(1, seq)
		cl.ts[1].DrainHeartbeats()
	})
	if allocs != 0 {
		t.Fatalf("send + drain: %v allocs", allocs)
	}
}

// FuzzHeartbeatDatagram feeds arbitrary datagrams to the heartbeat
// socket's decoder: it never panics, and a slot moves only for an
// authentic heartbeat frame that fills the datagram exactly, is meant for
// this incarnation of this rank and moves the slot forwards.
func FuzzHeartbeatDatagram(f *testing.F) {
	slots := transport.NewSlots(4)
	tr, err := Listen(testConfig(0, 4, slots, func(ranks.Rank, []byte) {}))
	if err != nil {
		f.Fatal(err)
	}
	defer tr.Close()
	c := wire.NewCodec(wire.Params{JobID: testJob, Key: testKey, Rank: 1, Incarnation: 7, N: 4, MaxPayload: DefaultMaxPayload})
	hbf := c.NewHeartbeatFrame()
	hbf.Bind(0, tr.Incarnation())
	f.Add(append([]byte(nil), hbf.Encode(3)...))
	f.Add(append([]byte(nil), hbf.Encode(1<<62)...)[:20])
	hbf.Bind(2, tr.Incarnation())
	f.Add(append([]byte(nil), hbf.Encode(4)...)) // to another rank
	hbf.Bind(0, 0)
	f.Add(append([]byte(nil), hbf.Encode(5)...)) // unbound
	m, _ := c.Append(nil, wire.Msg, []byte("x"))
	f.Add(m)
	hello, _ := c.Append(nil, wire.Hello, wire.AppendHello(nil, 0)) // an announcement
	f.Add(hello)
	check := wire.NewCodec(wire.Params{JobID: testJob, Key: testKey, N: 4, MaxPayload: DefaultMaxPayload})
	f.Fuzz(func(t *testing.T, b []byte) {
		before := make([]uint64, 4)
		for r := range before {
			before[r] = slots.Load(ranks.Rank(r))
		}
		tr.gotHeartbeat(b)
		for r := range before {
			after := slots.Load(ranks.Rank(r))
			if after == before[r] {
				continue
			}
			fr, n, err := check.Decode(b)
			if err != nil || n != len(b) || fr.Type != wire.Heartbeat || fr.Sender != ranks.Rank(r) {
				t.Fatalf("slot %d moved for a datagram that is not an authentic heartbeat of it (%v)", r, err)
			}
			beat, err := wire.DecodeHeartbeat(fr.Payload)
			if err != nil || beat.To != 0 || beat.ToIncarnation != tr.Incarnation() || beat.Seq != after || after < before[r] {
				t.Fatalf("slot %d moved from %d to %d for %+v (%v)", r, before[r], after, beat, err)
			}
		}
	})
}

// BenchmarkDrainOne is the observer's check cost over UDP with one
// heartbeat waiting: one recvmmsg and one authenticated frame.
func BenchmarkDrainOne(b *testing.B) {
	cl := newCluster(b, 2, 2, nil)
	defer cl.close()
	seq := connectHeartbeat(b, cl, 0, 1)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		seq++
		_ = cl.ts[0].SendHeartbeat(1, seq)
		b.StartTimer()
		cl.ts[1].DrainHeartbeats()
	}
}

// TestWatchedLaneIgnoresFlood: with rank 0 watching rank 1, a flood of
// datagrams at rank 0's port from another socket, far beyond its receive
// buffer, reaches only the port's socket: the kernel drops (and counts) the
// excess there, and every heartbeat of rank 1 waits in its own lane, the
// first drain of which stores the last one.
func TestWatchedLaneIgnoresFlood(t *testing.T) {
	cl := newCluster(t, 2, 2, nil)
	defer cl.close()
	cl.ts[0].WatchHeartbeats(1)
	u, err := net.Dial("udp", cl.ts[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	junk := make([]byte, wire.HeartbeatFrameSize)
	copy(junk, "VG")
	before := cl.ts[0].Stats().KernelDropped
	var seq uint64
	for i := range 40_000 { // ≈ 2.5 MiB of datagrams' buffer charge: well past 1 MiB
		_, _ = u.Write(junk)
		if i%400 == 0 {
			seq++
			if err := cl.ts[1].SendHeartbeat(0, seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "kernel drops counted", func() bool { return cl.ts[0].Stats().KernelDropped > before })
	cl.ts[0].drain(true) // the lane alone
	if got := cl.slots[0].Load(1); got != seq {
		t.Fatalf("after the flood, the lane's drain stored %d, want %d (every heartbeat of rank 1)", got, seq)
	}
	if got := cl.ts[0].Stats().Rejected[wire.ReasonBadMagic]; got != 0 {
		t.Fatalf("%d junk datagrams in the lane", got)
	}
	cl.ts[0].SweepHeartbeats()
	if got := cl.ts[0].Stats().Rejected; got[wire.ReasonBadVersion] == 0 || got[wire.ReasonBadVersion] > drainBudget*drainBatch {
		t.Fatalf("one sweep rejected %d junk datagrams, want 1 to %d", got[wire.ReasonBadVersion], drainBudget*drainBatch)
	}
}

// TestWatchedLaneSpoofedSource: datagrams whose source address and port
// are forged to be the watched emitter's (a raw socket: root on the host,
// or an attacker off it) match the watched lane's connected socket. The
// lane's filter (lanefilter.go) drops, in the kernel and counted there,
// those that are not frames of this job from the emitter's incarnation: a
// flood of them far beyond the lane's buffer leaves every heartbeat of the
// emitter stored. Forgeries with the exact header (an attacker who saw the
// job's frames) pass the filter, fail their tag and are counted (bad_tag),
// never stored; a flood of those still drops the emitter's heartbeats with
// them beyond the buffer (logged: what it costs).
func TestWatchedLaneSpoofedSource(t *testing.T) {
	cl := newCluster(t, 2, 2, nil)
	defer cl.close()
	cl.ts[0].WatchHeartbeats(1)
	src, err := netip.ParseAddrPort(cl.ts[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	dst, err := netip.ParseAddrPort(cl.ts[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	sp, err := hostile.NewSpoofer(src, dst)
	if err != nil {
		t.Skipf("no raw socket: %v", err)
	}
	defer sp.Close()
	exact := make([]byte, 64)
	n := cl.ts[1].HeartbeatSigner()(exact, 0, 1_000_000)
	exact = exact[:n]
	exact[n-1] ^= 1    // rank 1's heartbeat to rank 0 with a wrong tag, and a huge sequence
	var blind [][]byte // what a forger who never saw the job's frames can send
	for i := range 64 {
		b := append([]byte(nil), exact...)
		switch i % 4 {
		case 0:
			b[wire.HeaderIncarnationAt]++ // another incarnation of rank 1
		case 1:
			b[wire.HeaderJobAt]++ // another job
		case 2:
			b[wire.HeaderSenderAt]++ // another sender
		default:
			b[0] = 'X' // not a frame
		}
		blind = append(blind, b)
	}
	drops := func() uint64 { return cl.ts[0].Stats().KernelDropped }

	// (a) 64 blind forgeries: dropped by the filter, counted as kernel
	// drops, never seen by the check.
	sp.Load(blind)
	before := drops()
	if k, err := sp.Send(); err != nil || k != 64 {
		t.Fatalf("sent %d of 64: %v", k, err)
	}
	waitFor(t, "the filter's drops counted", func() bool { return drops() >= before+64 })
	cl.ts[0].drain(true)
	if got := cl.ts[0].Stats().Rejected; len(got) != 0 {
		t.Fatalf("blind forgeries reached the check: %v", got)
	}
	// (b) a flood of them, far beyond the lane's buffer, amid rank 1's
	// heartbeats: every heartbeat waits in the lane.
	var seq uint64
	for range 625 { // 40,000 datagrams
		_, _ = sp.Send()
		seq++
		if err := cl.ts[1].SendHeartbeat(0, seq); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the heartbeats", func() bool {
		cl.ts[0].drain(true)
		return cl.slots[0].Load(1) == seq
	})
	if got := cl.ts[0].Stats().Rejected; len(got) != 0 {
		t.Fatalf("blind forgeries reached the check: %v", got)
	}
	t.Logf("40,000 blind forgeries: %d kernel drops, all %d heartbeats of rank 1 stored", drops()-before, seq)

	// (c) forgeries with the exact header: refused by their tag; a flood
	// of them beyond the buffer drops heartbeats too.
	exacts := make([][]byte, 64)
	for i := range exacts {
		exacts[i] = exact
	}
	sp.Load(exacts)
	if k, err := sp.Send(); err != nil || k != 64 {
		t.Fatalf("sent %d of 64: %v", k, err)
	}
	waitFor(t, "the exact forgeries refused", func() bool {
		cl.ts[0].drain(true)
		return cl.ts[0].Stats().Rejected[wire.ReasonBadTag] == 64
	})
	before, first := drops(), seq
	for range 625 {
		_, _ = sp.Send()
		seq++
		if err := cl.ts[1].SendHeartbeat(0, seq); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "kernel drops counted", func() bool { return drops() > before })
	for range 100 {
		cl.ts[0].drain(true)
	}
	got := cl.slots[0].Load(1)
	t.Logf("40,000 exact forgeries: %d kernel drops, %d refused (bad_tag), rank 1's word at %d (%d to %d sent)",
		drops()-before, cl.ts[0].Stats().Rejected[wire.ReasonBadTag]-64, got, first+1, seq)
	if got > seq || cl.ts[0].Stats().Rejected[wire.ReasonBadTag] <= 64 {
		t.Fatalf("word %d (%d sent), %d refused: the forgeries must be refused, none stored", got, seq, cl.ts[0].Stats().Rejected[wire.ReasonBadTag])
	}
}

// TestLaneFilterFollowsIncarnation: the lane's filter names the watched
// emitter's incarnation once it is known, and a new incarnation learned
// later (rebound) replaces it, so that the new incarnation's heartbeats
// pass and the old one's do not.
func TestLaneFilterFollowsIncarnation(t *testing.T) {
	cl := newCluster(t, 2, 2, nil)
	defer cl.close()
	cl.ts[0].WatchHeartbeats(1)
	if err := cl.ts[1].SendHeartbeat(0, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first heartbeat", func() bool { cl.ts[0].drain(true); return cl.slots[0].Load(1) == 1 })
	// Rank 1 restarts: a new incarnation at the same address, which rank 0
	// learns (as from its Hello).
	old := cl.ts[1].Incarnation()
	cl.ts[1].Close()
	s1 := transport.NewSlots(2)
	cfg := testConfig(1, 2, s1, func(ranks.Rank, []byte) {})
	cfg.ListenAddr, cfg.Incarnation = cl.ts[1].Addr(), old+1
	t1, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl.ts[1] = t1
	if err := t1.SetPeers([]string{cl.ts[0].Addr(), t1.Addr()}); err != nil {
		t.Fatal(err)
	}
	if _, err := t1.incs.Observe(0, cl.ts[0].Incarnation()); err != nil {
		t.Fatal(err)
	}
	before := cl.ts[0].Stats().KernelDropped
	if err := t1.SendHeartbeat(0, 2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new incarnation's heartbeat dropped by the old filter", func() bool { return cl.ts[0].Stats().KernelDropped > before })
	if newer, _ := cl.ts[0].incs.Observe(1, old+1); !newer {
		t.Fatal("the new incarnation was not newer")
	}
	cl.ts[0].rebound(1)
	if err := t1.SendHeartbeat(0, 3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new incarnation's heartbeat", func() bool { cl.ts[0].drain(true); return cl.slots[0].Load(1) == 3 })
}

// TestIncarnationAnnounced: an emitter that does not know its observer's
// incarnation sends heartbeats that the observer refuses
// (unbound_heartbeat) and answers with its incarnation; once the emitter
// drained it, its heartbeats are bound and accepted, and its rebind
// function heard of the observer.
func TestIncarnationAnnounced(t *testing.T) {
	cl := newBareCluster(t, 2, 2, nil)
	defer cl.close()
	var rebound atomic.Int64
	rebound.Store(-1)
	cl.ts[0].SetHeartbeatRebind(func(r ranks.Rank) { rebound.Store(int64(r)) })
	if err := cl.ts[0].SendHeartbeat(1, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refusal", func() bool {
		cl.ts[1].DrainHeartbeats()
		return cl.ts[1].Stats().Rejected[wire.ReasonUnbound] == 1
	})
	if got := cl.slots[1].Load(0); got != 0 {
		t.Fatalf("an unbound heartbeat stored %d", got)
	}
	waitFor(t, "the announcement", func() bool {
		cl.ts[0].DrainHeartbeats()
		return cl.ts[0].incs.Latest(1) == cl.ts[1].Incarnation()
	})
	if r := rebound.Load(); r != 1 {
		t.Fatalf("rebind told %d, want 1", r)
	}
	if err := cl.ts[0].SendHeartbeat(1, 2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bound heartbeat", func() bool { return cl.load(1, 0) == 2 })
	if st := cl.ts[0].Stats().Rejected; len(st) != 0 {
		t.Fatalf("the emitter rejected %v", st)
	}
	// Replayed unbound heartbeats make at most one announcement per
	// announceEvery.
	cl.ts[0].incs = wire.NewIncarnations(2) // signed as before the announcement
	b := make([]byte, 64)
	unbound := b[:cl.ts[0].HeartbeatSigner()(b, 1, 1)]
	u, err := net.Dial("udp", cl.ts[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	time.Sleep(announceEvery) // past the first announcement's interval
	start := time.Now()
	for range 200 {
		_, _ = u.Write(unbound)
	}
	waitFor(t, "the refusals", func() bool {
		cl.ts[1].DrainHeartbeats()
		return cl.ts[1].Stats().Rejected[wire.ReasonUnbound] == 201
	})
	allowed := 1 + int(time.Since(start)/announceEvery)
	time.Sleep(20 * time.Millisecond)
	got := 0
	for _, lane := range []bool{false, true} {
		for n := cl.ts[0].hb.recv(lane); n > 0; n = cl.ts[0].hb.recv(lane) {
			got += n
		}
	}
	if got == 0 || got > allowed {
		t.Fatalf("%d announcements for 200 refusals in %d intervals of %v", got, allowed, announceEvery)
	}
}

// TestReplayedHeartbeats replays heartbeats rank 0 sent to rank 1: to
// rank 1 itself (old_heartbeat), to rank 2, the new observer a ring would
// give rank 0 if rank 1 died (wrong_receiver), and to a restarted rank 1
// (wrong_incarnation). None moves a word.
func TestReplayedHeartbeats(t *testing.T) {
	cl := newCluster(t, 3, 3, nil)
	defer cl.close()
	sign := cl.ts[0].HeartbeatSigner()
	var captured [][]byte
	for seq := uint64(1); seq <= 20; seq++ {
		b := make([]byte, 64)
		captured = append(captured, b[:sign(b, 1, seq)])
	}
	u1, err := net.Dial("udp", cl.ts[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer u1.Close()
	for _, b := range captured { // what rank 1 received
		_, _ = u1.Write(b)
	}
	waitFor(t, "the heartbeats", func() bool { return cl.load(1, 0) == 20 })
	replay := func(to int, reason string) {
		t.Helper()
		u, err := net.Dial("udp", cl.ts[to].Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		for _, b := range captured {
			_, _ = u.Write(b)
		}
		waitFor(t, reason, func() bool {
			cl.ts[to].DrainHeartbeats()
			return cl.ts[to].Stats().Rejected[reason] == uint64(len(captured))
		})
	}
	replay(1, wire.ReasonOldHeartbeat)
	replay(2, wire.ReasonWrongReceiver)
	if got := cl.slots[2].Load(0); got != 0 {
		t.Fatalf("rank 2's word for rank 0 moved to %d", got)
	}
	// Rank 1 restarts: a new incarnation, at a new address.
	cl.ts[1].Close()
	s1 := transport.NewSlots(3)
	cfg := testConfig(1, 3, s1, func(ranks.Rank, []byte) {})
	cfg.Incarnation = cl.ts[1].Incarnation() + 1
	t1, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl.ts[1], cl.slots[1] = t1, s1
	replay(1, wire.ReasonWrongIncarnation)
	if got := s1.Load(0); got != 0 {
		t.Fatalf("the restarted rank's word for rank 0 moved to %d", got)
	}
}
