package node_test

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/mem"
)

// syncSeeds is how many seeds per overlay the three-failure test runs; for
// a longer run: go test -race -run TestThreeAdjacent ./node/ -args -sync.seeds=20
var syncSeeds = flag.Int("sync.seeds", 3, "seeds per overlay of TestThreeAdjacentFailuresReachEverySurvivor")

// syncCfg is a small cluster's timing, generous enough for -race on a
// loaded machine.
var syncCfg = node.Config{
	HeartbeatPeriod: 20 * time.Millisecond,
	SuspectTimeout:  500 * time.Millisecond,
	StartGrace:      time.Second,
}

// TestThreeAdjacentFailuresReachEverySurvivor is the benchmark's finding:
// at N = 8, ranks 1, 2 and 3 crash at once (three failures, above Theorem
// 1's ⌊log2 8⌋−1 = 2). Rank 4 detects 3 first and broadcasts it with
// D = {3}: over HBA's A = {0,1,2,4,5,6,7} rank 0's only neighbours in the
// second hypercube are 1 and 2, both dead, so the broadcast misses rank 0.
// The later broadcasts of 2 and 1 carry D ⊇ {3}; the digest check (sync.go)
// makes rank 0 fetch 3's record from their source. Every survivor must end
// with D = {1, 2, 3}, with the crash reported as a crash by its observer.
func TestThreeAdjacentFailuresReachEverySurvivor(t *testing.T) {
	seeds := *syncSeeds
	if testing.Short() {
		seeds = 1
	}
	for _, overlay := range []string{"hba", "bmg"} {
		for seed := uint64(1); seed <= uint64(seeds); seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", overlay, seed), func(t *testing.T) {
				t.Parallel() // eight small clusters at once: δ = 500 ms leaves room
				cfg := syncCfg
				cfg.Broadcast = overlay
				c := startCluster(t, 8, cfg, mem.WithDelay(2*time.Millisecond, seed))
				time.Sleep(300 * time.Millisecond) // the ring settles
				for _, r := range []ranks.Rank{1, 2, 3} {
					c.killed[r] = true
					c.net.Kill(r) // all three silent at once…
				}
				for _, r := range []ranks.Rank{1, 2, 3} {
					c.nodes[r].Close() // …then their threads stop
				}
				c.waitComplete(30 * time.Second)
				c.waitRing(10 * time.Second)
				for i, nd := range c.nodes {
					if c.killed[ranks.Rank(i)] {
						continue
					}
					if d := nd.Dead(); !slices.Equal(d, []ranks.Rank{1, 2, 3}) {
						t.Fatalf("rank %d: D = %v, want [1 2 3]", i, d)
					}
					for _, r := range []ranks.Rank{1, 2, 3} {
						ev, _ := nd.Known(r)
						if ev.Left || ev.Detector != 4 {
							t.Fatalf("rank %d: %d reported as %+v, want a crash detected by 4", i, r, ev)
						}
					}
				}
			})
		}
	}
}

// rawJob runs nodes 0..real-1 of a job of n ranks on the in-memory
// transport; rank n-1 is played by the test on a raw endpoint, and the
// ranks in between never start. Nobody suspects anybody during the test.
type rawJob struct {
	t     *testing.T
	nodes []*node.Node
	raw   transport.Transport
	rank  ranks.Rank  // the raw endpoint's rank, n-1
	got   chan rawMsg // messages received by the raw endpoint
}

type rawMsg struct {
	from ranks.Rank
	msg  wire.Message
}

func startRawJob(t *testing.T, n, real int) *rawJob {
	t.Helper()
	net := mem.NewNetwork(n)
	j := &rawJob{t: t, rank: ranks.Rank(n - 1), got: make(chan rawMsg, 1024)}
	for i := range real {
		nd, err := node.Start(node.Config{Rank: ranks.Rank(i), Size: n, SuspectTimeout: 10 * time.Second, StartGrace: time.Minute},
			func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
				return net.Endpoint(ranks.Rank(i), s, h), nil
			})
		if err != nil {
			t.Fatal(err)
		}
		j.nodes = append(j.nodes, nd)
	}
	j.raw = net.Endpoint(j.rank, nil, func(from ranks.Rank, p []byte) {
		m, err := wire.DecodeMessage(p, n)
		if err != nil {
			t.Errorf("raw rank got a bad message from %d: %v", from, err)
			return
		}
		select {
		case j.got <- rawMsg{from, m}:
		default:
			t.Errorf("raw rank: inbox full")
		}
	})
	t.Cleanup(func() {
		for _, nd := range j.nodes {
			nd.Close()
		}
		net.Close()
	})
	return j
}

func (j *rawJob) send(to ranks.Rank, m wire.Message) {
	j.t.Helper()
	if err := j.raw.Send(to, wire.AppendMessage(nil, m)); err != nil {
		j.t.Fatal(err)
	}
}

// nextSync returns the next SYNC that rank from sends to the raw rank,
// skipping everything else, or fails after timeout.
func (j *rawJob) nextSync(from ranks.Rank, timeout time.Duration) *wire.Sync {
	j.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case in := <-j.got:
			if s, ok := in.msg.(*wire.Sync); ok && in.from == from {
				return s
			}
		case <-deadline:
			j.t.Fatalf("no SYNC from %d within %v", from, timeout)
			return nil
		}
	}
}

// noSync fails if rank from sends a SYNC to the raw rank within d.
func (j *rawJob) noSync(from ranks.Rank, d time.Duration) {
	j.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case in := <-j.got:
			if s, ok := in.msg.(*wire.Sync); ok && in.from == from {
				j.t.Fatalf("unexpected SYNC from %d: %+v", from, s)
			}
		case <-deadline:
			return
		}
	}
}

// waitKnown waits until nd knows r is gone and returns the event.
func waitKnown(t *testing.T, nd *node.Node, r ranks.Rank) node.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ev, ok := nd.Known(r); ok {
			return ev
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank %d never learned that %d is gone", nd.Rank(), r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSyncBroadcastDigest: rank 5 broadcasts that 4 crashed with D = {3, 4};
// rank 0 does not know 3, asks the source about it once (not again for a
// second broadcast within δ), and learns from the answer that 3 departed:
// it is reported Left, with the answer's detector and detection time.
func TestSyncBroadcastDigest(t *testing.T) {
	j := startRawJob(t, 6, 3)
	sub := j.nodes[0].Events()
	detected := time.Unix(1_700_000_000, 42)
	bc := func(seq uint64) *wire.Bcast {
		return &wire.Bcast{Message: bcast.Message{ID: bcast.ID{Source: 5, Seq: seq}, Kind: bcast.Failed,
			Dead: []ranks.Rank{4}, D: ranks.Of(3, 4), Detector: 5, DetectedAt: time.Now().UnixNano()}}
	}
	j.send(0, bc(1))
	if s := j.nextSync(0, 10*time.Second); !slices.Equal(s.Ask, []ranks.Rank{3}) || len(s.Records) != 0 {
		t.Fatalf("rank 0 sent %+v, want a request for [3]", s)
	}
	j.send(0, bc(2)) // same D: 3 is already asked about
	j.noSync(0, 500*time.Millisecond)
	if _, ok := j.nodes[0].Known(3); ok {
		t.Fatal("rank 0 learned 3 before any answer")
	}
	j.send(0, &wire.Sync{Records: []wire.SyncRecord{{Rank: 3, Kind: bcast.Left, Detector: 4, DetectedAt: detected.UnixNano()}}})
	ev := waitKnown(t, j.nodes[0], 3)
	if !ev.Left || ev.Detector != 4 || !ev.DetectedAt.Equal(detected) {
		t.Fatalf("departure of 3 learned through SYNC reported as %+v, want Left, detector 4, at %v", ev, detected)
	}
	for _, want := range []ranks.Rank{4, 3} {
		if got := <-sub; got.Rank != want || got.Left != (want == 3) {
			t.Fatalf("event %+v, want rank %d", got, want)
		}
	}
	if d := j.nodes[0].Dead(); !slices.Equal(d, []ranks.Rank{3, 4}) {
		t.Fatalf("Dead() = %v", d)
	}
	if b := j.nodes[0].Stats().BadMessages; b != 0 {
		t.Fatalf("%d bad messages", b)
	}
}

// TestSyncSegmentDigest: rank 5 announces itself as rank 2's observer, so
// 3 and 4 are in its D; rank 2 asks about them and learns them, each with
// its kind. Rank 2 then answers requests with its own records, only for
// the ranks it holds dead.
func TestSyncSegmentDigest(t *testing.T) {
	j := startRawJob(t, 6, 3)
	j.send(2, &wire.NewObserver{Observer: 5})
	if s := j.nextSync(2, 10*time.Second); !slices.Equal(s.Ask, []ranks.Rank{3, 4}) {
		t.Fatalf("rank 2 sent %+v, want a request for [3 4]", s)
	}
	recs := []wire.SyncRecord{
		{Rank: 3, Kind: bcast.Failed, Detector: 4, DetectedAt: 11},
		{Rank: 4, Kind: bcast.Left, Detector: 5, DetectedAt: 12},
	}
	j.send(2, &wire.Sync{Records: recs})
	if ev := waitKnown(t, j.nodes[2], 3); ev.Left || ev.Detector != 4 {
		t.Fatalf("crash of 3 reported as %+v", ev)
	}
	if ev := waitKnown(t, j.nodes[2], 4); !ev.Left || ev.Detector != 5 {
		t.Fatalf("departure of 4 reported as %+v", ev)
	}
	if st, _ := j.nodes[2].Status(); st.Observer != 5 {
		t.Fatalf("rank 2's observer is %d, want 5", st.Observer)
	}
	j.send(2, &wire.Sync{Ask: []ranks.Rank{0, 1, 3, 4}})
	s := j.nextSync(2, 10*time.Second)
	if len(s.Ask) != 0 || !slices.Equal(s.Records, recs) {
		t.Fatalf("rank 2 answered %+v, want its records %+v", s, recs)
	}
}

// TestSyncRequestsAreBounded: a broadcast whose D holds 300 ranks unknown
// to rank 0 makes it ask in messages of at most wire.MaxSyncRanks ranks,
// each rank once.
func TestSyncRequestsAreBounded(t *testing.T) {
	const n = 600
	j := startRawJob(t, n, 3)
	var D ranks.Set
	for r := ranks.Rank(3); r < 303; r++ {
		D.Add(r)
	}
	j.send(0, &wire.Bcast{Message: bcast.Message{ID: bcast.ID{Source: j.rank, Seq: 1}, Kind: bcast.Failed,
		Dead: []ranks.Rank{300}, D: D, Detector: j.rank}})
	var asked ranks.Set
	for asked.Len() < 299 {
		s := j.nextSync(0, 10*time.Second)
		if len(s.Ask) > wire.MaxSyncRanks {
			t.Fatalf("a request for %d ranks", len(s.Ask))
		}
		for _, r := range s.Ask {
			if r == 300 || !D.Has(r) || !asked.Add(r) {
				t.Fatalf("rank 0 asked about %d (known, outside D, or twice)", r)
			}
		}
	}
	j.noSync(0, 300*time.Millisecond)
}

// TestSyncBadInputCountedNotFatal: malformed SYNCs, SYNCs naming unknown
// ranks and records of live ranks are counted and change nothing.
func TestSyncBadInputCountedNotFatal(t *testing.T) {
	j := startRawJob(t, 6, 3)
	rec := func(r ranks.Rank) *wire.Sync {
		return &wire.Sync{Records: []wire.SyncRecord{{Rank: r, Kind: bcast.Failed, Detector: 5}}}
	}
	bad := [][]byte{
		{byte(wire.TypeSync)},                                        // truncated
		{byte(wire.TypeSync), 0, 0},                                  // asks and answers nothing
		{byte(wire.TypeSync), 1, 6, 0},                               // asks about rank 6 of 6
		{byte(wire.TypeSync), 2, 1, 0, 0},                            // repeated rank
		{byte(wire.TypeSync), 0, 1, 6, 1, 0},                         // record of rank 6 of 6 (and truncated)
		{byte(wire.TypeSync), 0, 1, 2, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // unknown kind 9
		{byte(wire.TypeSync), 0, 1, 2, 1, 7, 0, 0, 0, 0, 0, 0, 0, 0}, // detector 7 of 6
		wire.AppendMessage(nil, rec(0)),                              // a record of the receiver itself
		wire.AppendMessage(nil, rec(5)),                              // a record of the sender itself
	}
	for _, p := range bad {
		if err := j.raw.Send(0, p); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for j.nodes[0].Stats().BadMessages < uint64(len(bad)) {
		if time.Now().After(deadline) {
			t.Fatalf("bad messages counted: %d, want %d", j.nodes[0].Stats().BadMessages, len(bad))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := j.nodes[0].Dead(); len(d) != 0 {
		t.Fatalf("bad SYNCs made rank 0 believe %v dead", d)
	}
	if st, _ := j.nodes[0].Status(); st.Observer != 1 || st.Emitter != 5 {
		t.Fatalf("bad SYNCs moved rank 0's ring to emitter %d, observer %d", st.Emitter, st.Observer)
	}
	j.noSync(0, 200*time.Millisecond) // and it answered none of them
}
