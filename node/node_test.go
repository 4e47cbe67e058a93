package node_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/lab/testnet"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/mem"
)

// cluster is an in-process job on the in-memory transport.
type cluster struct {
	t      *testing.T
	net    *mem.Network
	nodes  []*node.Node
	killed map[ranks.Rank]bool
}

func startCluster(t *testing.T, n int, cfg node.Config, opts ...mem.Option) *cluster {
	t.Helper()
	return startWrapped(t, n, cfg, nil, opts...)
}

// startWrapped is startCluster with each rank's endpoint passed through wrap
// (nil: used as it is).
func startWrapped(t *testing.T, n int, cfg node.Config, wrap func(ranks.Rank, transport.Transport) transport.Transport,
	opts ...mem.Option) *cluster {
	t.Helper()
	c := &cluster{t: t, net: mem.NewNetwork(n, opts...), killed: map[ranks.Rank]bool{}}
	for i := 0; i < n; i++ {
		cfg := cfg
		cfg.Rank, cfg.Size = ranks.Rank(i), n
		nd, err := node.Start(cfg, func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
			var tr transport.Transport = c.net.Endpoint(ranks.Rank(i), s, h)
			if wrap != nil {
				tr = wrap(ranks.Rank(i), tr)
			}
			return tr, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, nd)
	}
	t.Cleanup(c.close)
	return c
}

func (c *cluster) close() {
	for _, nd := range c.nodes {
		nd.Close()
	}
	c.net.Close()
}

// kill crashes rank r: its endpoint goes silent, then its threads stop.
func (c *cluster) kill(r ranks.Rank) {
	c.killed[r] = true
	c.net.Kill(r)
	c.nodes[r].Close()
}

// checkAccuracy fails if any alive node holds a live rank in its dead list.
func (c *cluster) checkAccuracy() {
	c.t.Helper()
	for i, nd := range c.nodes {
		if c.killed[ranks.Rank(i)] {
			continue
		}
		for _, d := range nd.Dead() {
			if !c.killed[d] {
				c.t.Fatalf("rank %d falsely suspects live rank %d", i, d)
			}
		}
	}
}

// waitComplete waits until every alive node knows every killed rank.
func (c *cluster) waitComplete(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c.checkAccuracy()
		missing := ""
		for i, nd := range c.nodes {
			if c.killed[ranks.Rank(i)] {
				continue
			}
			for d := range c.killed {
				if _, ok := nd.Known(d); !ok {
					missing = fmt.Sprintf("rank %d does not know %d is dead", i, d)
				}
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not complete after %v: %s", timeout, missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitRing waits until the ring is reconnected around the dead ranks.
func (c *cluster) waitRing(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var alive []ranks.Rank
		for i := range c.nodes {
			if !c.killed[ranks.Rank(i)] {
				alive = append(alive, ranks.Rank(i))
			}
		}
		bad := ""
		for k, p := range alive {
			st, err := c.nodes[p].Status()
			if err != nil {
				c.t.Fatal(err)
			}
			pred, succ := alive[(k+len(alive)-1)%len(alive)], alive[(k+1)%len(alive)]
			if st.Emitter != pred || st.Observer != succ {
				bad = fmt.Sprintf("rank %d: emitter %d observer %d, want %d and %d", p, st.Emitter, st.Observer, pred, succ)
			}
		}
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("ring not reconnected after %v: %s", timeout, bad)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// relaxed timing for in-process clusters of hundreds of nodes on two cores
// under the race detector: accuracy must hold, so δ is generous.
var clusterCfg = node.Config{
	HeartbeatPeriod: 50 * time.Millisecond,
	SuspectTimeout:  1500 * time.Millisecond,
	CheckPeriod:     100 * time.Millisecond,
	StartGrace:      3 * time.Second,
}

func TestCluster256RandomFailures(t *testing.T) {
	n, seeds := 256, 3
	if testing.Short() {
		n, seeds = 64, 2
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			for _, overlay := range []string{"hba", "bmg"} {
				cfg := clusterCfg
				cfg.Broadcast = overlay
				c := startCluster(t, n, cfg, mem.WithDelay(2*time.Millisecond, seed))
				rng := rand.New(rand.NewPCG(seed, 5))
				f := 1 + rng.IntN(hb.MaxOverlapping(n))
				// Half the time consecutive ranks (the hard case for the ring).
				start := ranks.Rank(rng.IntN(n))
				for len(c.killed) < f {
					r := ranks.Rank(rng.IntN(n))
					if seed%2 == 0 {
						r = (start + ranks.Rank(len(c.killed))) % ranks.Rank(n)
					}
					if !c.killed[r] {
						c.kill(r)
						time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
					}
				}
				c.waitComplete(60 * time.Second)
				c.waitRing(30 * time.Second)
				c.checkAccuracy()
				c.close()
			}
		})
	}
}

func TestEventsOncePerRank(t *testing.T) {
	c := startCluster(t, 8, node.Config{HeartbeatPeriod: 20 * time.Millisecond, SuspectTimeout: 500 * time.Millisecond, StartGrace: time.Second})
	sub := c.nodes[0].Events()
	c.kill(3)
	c.kill(4)
	c.waitComplete(20 * time.Second)
	got := map[ranks.Rank]node.Event{}
	for len(got) < 2 {
		select {
		case ev := <-sub:
			if _, dup := got[ev.Rank]; dup {
				t.Fatalf("rank %d reported twice", ev.Rank)
			}
			if ev.Left {
				t.Fatalf("crash of %d reported as a departure", ev.Rank)
			}
			got[ev.Rank] = ev
		case <-time.After(10 * time.Second):
			t.Fatal("events not delivered on the channel")
		}
	}
	if got[3].Detector != 5 && got[3].Detector != 4 {
		t.Fatalf("rank 3 detected by %d, want its observer (4, or 5 after 4 died)", got[3].Detector)
	}
	if got[4].Detector != 5 {
		t.Fatalf("rank 4 detected by %d, want 5", got[4].Detector)
	}
	if d := c.nodes[0].Dead(); !slices.Equal(d, []ranks.Rank{3, 4}) {
		t.Fatalf("Dead() = %v", d)
	}
	// A late subscriber gets the past events too.
	late := c.nodes[1].Events()
	if len(late) != 2 {
		t.Fatalf("late subscriber got %d past events, want 2", len(late))
	}
	// Every survivor counted two deaths; the detectors reported them.
	var reported uint64
	for i, nd := range c.nodes {
		if i == 3 || i == 4 {
			continue
		}
		st := nd.Stats()
		if st.DeathsLearned != 2 || st.Departures != 0 {
			t.Errorf("rank %d: Stats deaths learned %d, departures %d; want 2, 0", i, st.DeathsLearned, st.Departures)
		}
		if want := uint64(0); ranks.Rank(i) != got[3].Detector && ranks.Rank(i) != got[4].Detector && st.Reported != want {
			t.Errorf("rank %d: Stats.Reported %d, not a detector", i, st.Reported)
		}
		reported += st.Reported
	}
	if reported != 2 {
		t.Errorf("Stats.Reported sums to %d over the survivors, want 2", reported)
	}
}

func TestLeaveIsReportedAsDeparture(t *testing.T) {
	c := startCluster(t, 6, node.Config{HeartbeatPeriod: 20 * time.Millisecond, SuspectTimeout: 500 * time.Millisecond, StartGrace: time.Second})
	time.Sleep(200 * time.Millisecond)
	if err := c.nodes[2].Leave(context.Background(), 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	c.kill(2) // the process then exits
	c.waitComplete(20 * time.Second)
	for i, nd := range c.nodes {
		if i == 2 {
			continue
		}
		ev, _ := nd.Known(2)
		if !ev.Left || ev.Detector != 3 {
			t.Fatalf("rank %d: departure of 2 reported as %+v, want Left by 3", i, ev)
		}
		if st := nd.Stats(); st.Departures != 1 || st.DeathsLearned != 0 || st.Reported != 0 {
			t.Errorf("rank %d: Stats departures %d, deaths %d, reported %d; want 1, 0, 0", i, st.Departures, st.DeathsLearned, st.Reported)
		}
	}
	c.waitRing(10 * time.Second)
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg  node.Config
		want string
	}{
		{node.Config{Size: 0}, "Size"},
		{node.Config{Size: 4, Rank: 4}, "Rank"},
		{node.Config{Size: 4, HeartbeatPeriod: time.Second, SuspectTimeout: time.Second}, "SuspectTimeout"},
		{node.Config{Size: 4, Broadcast: "flood"}, "Broadcast"},
		{node.Config{Size: 4, PinEmitter: true, EmitterCPU: -2}, "EmitterCPU"},
		{node.Config{Size: 4, CheckPeriod: -1}, "CheckPeriod"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.want)
		}
		if _, err := node.Start(tc.cfg, nil); err == nil {
			t.Errorf("Start accepted %+v", tc.cfg)
		}
	}
}

func TestMalformedMessagesAreCountedNotFatal(t *testing.T) {
	// Ranks 0..2 are nodes; rank 3 is a raw endpoint sending garbage to 0.
	nw := mem.NewNetwork(4)
	defer nw.Close()
	var nodes []*node.Node
	for i := 0; i < 3; i++ {
		// δ of a minute: what is checked is the garbage, not detection,
		// and a loaded host must not make a live rank look dead.
		nd, err := node.Start(node.Config{Rank: ranks.Rank(i), Size: 4, StartGrace: time.Minute, SuspectTimeout: time.Minute},
			func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
				return nw.Endpoint(ranks.Rank(i), s, h), nil
			})
		if err != nil {
			t.Fatal(err)
		}
		defer nd.Close()
		nodes = append(nodes, nd)
	}
	ep := nw.Endpoint(3, transport.NewSlots(4), func(ranks.Rank, []byte) {})
	bad := [][]byte{
		{},              // empty
		{0xff},          // unknown type
		{1},             // NEWOBSERVER without its rank
		{3, 0, 0},       // truncated broadcast
		{1, 9},          // NEWOBSERVER naming rank 9 of 4
		{1, 2},          // NEWOBSERVER naming another rank than its sender
		{2, 3, 0, 0xaa}, // LEAVE with trailing bytes
	}
	for _, p := range bad {
		ep.Send(0, p)
	}
	deadline := time.Now().Add(10 * time.Second)
	for nodes[0].Stats().BadMessages < uint64(len(bad)) {
		if time.Now().After(deadline) {
			t.Fatalf("bad messages counted: %d, want %d", nodes[0].Stats().BadMessages, len(bad))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := nodes[0].Dead(); len(d) != 0 {
		t.Fatalf("garbage made rank 0 believe %v dead", d)
	}
	if st, _ := nodes[0].Status(); st.Observer != 1 {
		t.Fatalf("garbage moved rank 0's observer to %d", st.Observer)
	}
}

func TestCloseJoinsEverything(t *testing.T) {
	leaks := testnet.NoLeaks(t, 5*time.Second)
	c := startCluster(t, 8, node.Config{})
	time.Sleep(100 * time.Millisecond)
	c.close()
	leaks()
}

// TestWholeJobLeavesAtOnce: every rank leaves at the same moment, as at
// the end of a job. The LEAVEs are handed on along the ring of departing
// ranks (hb.Ring.Departed): no rank learns of a crash while they leave,
// and none drops a LEAVE as out of order (a rank's own LEAVE goes out
// before any it forwards).
func TestWholeJobLeavesAtOnce(t *testing.T) {
	const n = 16
	c := startCluster(t, n, node.Config{HeartbeatPeriod: 10 * time.Millisecond, SuspectTimeout: 100 * time.Millisecond, StartGrace: 500 * time.Millisecond})
	time.Sleep(700 * time.Millisecond)
	// What the start-up left (a rank of this in-process job starved while
	// it started) is not the departure's doing: only what changes counts.
	before := make([]node.Stats, n)
	for i, nd := range c.nodes {
		before[i] = nd.Stats()
	}
	errs := make(chan error, n)
	for _, nd := range c.nodes {
		go func() { errs <- nd.Leave(context.Background(), 300*time.Millisecond) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, nd := range c.nodes {
		st, b := nd.Stats(), before[i]
		if d, r, bad := st.DeathsLearned-b.DeathsLearned, st.Reported-b.Reported, st.BadMessages-b.BadMessages; d+r+bad != 0 {
			t.Errorf("rank %d while leaving: %d crashes learned, %d reported, %d messages that made no sense; want none", i, d, r, bad)
		}
	}
}
