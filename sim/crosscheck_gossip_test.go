package sim

import (
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/mem"
)

// phaseCounter wraps a rank's transport and counts the failure broadcasts'
// messages it sends, by phase.
type phaseCounter struct {
	transport.Transport
	n  int
	mu *sync.Mutex
	by map[bcast.Phase]int
}

func (c phaseCounter) Send(to ranks.Rank, p []byte) error {
	if m, err := wire.DecodeMessage(p, c.n); err == nil {
		if b, ok := m.(*wire.Bcast); ok && b.Kind == bcast.Failed {
			c.mu.Lock()
			c.by[b.Hop.Phase]++
			c.mu.Unlock()
		}
	}
	return c.Transport.Send(to, p)
}

// TestCrossCheckGossip runs one failure broadcast on the node runtime over
// the in-memory transport and on the simulator (GossipSim, the same
// bcast.Gossip cores in virtual time) with the same seed, and compares
// their message counts: every survivor delivers the failure exactly once
// in both.
//
// What must be equal, and why not more. A rank's step clock for a
// broadcast starts from its first copy, taken to have travelled ℓ+1 steps
// (bcast.Gossip); the network here has exactly that one-way latency
// (mem.WithLatency) and a step of 10 ms, so the runtime's clocks stay
// within a fraction of a step of the simulator's. What a rank sends in the
// dissemination depends only on its step clock and its seeded draws, and
// every dissemination copy arrives at least one step before any
// correction starts, so the dissemination (random gossip or tree) is the
// same message for message. OCG's correction is C messages per g-node to
// fixed ring positions, whatever arrives when, so OCG's total is equal too.
// FCG's correction (ctree's) stops each direction when the rank has heard
// enough g-nodes, and the model's copies arrive exactly at a step's
// boundary: a runtime copy a few hundred µs early or late lands in the
// step before or after, so that count depends on scheduling and is only
// logged.
func TestCrossCheckGossip(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real 32-rank clusters for several seconds each")
	}
	for _, c := range []struct {
		broadcast string
		cfg       bcast.GossipConfig
		exact     bool // the correction's count too
	}{
		{"ctree", bcast.GossipConfig{Alg: bcast.FCG, Tree: true}, false},
		{"ocg", bcast.GossipConfig{Alg: bcast.OCG}, true},
	} {
		t.Run(c.broadcast, func(t *testing.T) { crossCheckGossip(t, c.broadcast, c.cfg, c.exact) })
	}
}

func crossCheckGossip(t *testing.T, broadcast string, cfg bcast.GossipConfig, exact bool) {
	const n, victim, seed = 32, 9, 18
	h, delta, check := 50*time.Millisecond, 1500*time.Millisecond, 100*time.Millisecond
	o, L := 10*time.Millisecond, 20*time.Millisecond
	cfg.Step, cfg.Latency, cfg.Seed = int64(o), int64(L), seed
	hop := time.Duration(cfg.Ell()+1) * o

	// Runtime.
	nw := mem.NewNetwork(n, mem.WithLatency(hop))
	t.Cleanup(func() { nw.Close() })
	var mu sync.Mutex
	sent := map[bcast.Phase]int{}
	nodes := make([]*node.Node, n)
	for i := range n {
		nd, err := node.Start(node.Config{Rank: ranks.Rank(i), Size: n, HeartbeatPeriod: h, SuspectTimeout: delta,
			CheckPeriod: check, StartGrace: 2 * time.Second, Broadcast: broadcast, MendProbe: -1,
			Gossip: node.GossipConfig{Step: o, Latency: L, Seed: seed}},
			func(s *transport.Slots, hd transport.Handler) (transport.Transport, error) {
				return phaseCounter{nw.Endpoint(ranks.Rank(i), s, hd), n, &mu, sent}, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = nd
		t.Cleanup(func() { nd.Close() })
	}
	time.Sleep(2500 * time.Millisecond) // past the start-up grace
	nw.Kill(victim)
	nodes[victim].Close()
	waitStable(t, nodes, map[ranks.Rank]bool{victim: true}, 30*time.Second)
	time.Sleep(time.Second) // the correction's last messages
	var detector ranks.Rank
	for i, nd := range nodes {
		if i == victim {
			continue
		}
		ev, ok := nd.Known(victim)
		if !ok {
			t.Fatalf("runtime: rank %d does not know %d died", i, victim)
		}
		if i == 0 {
			detector = ev.Detector
		} else if ev.Detector != detector {
			t.Fatalf("runtime: ranks disagree on who detected %d: %d and %d", victim, detector, ev.Detector)
		}
		got := 0
		for ev := range drain(nd.Events()) {
			if ev.Rank == victim {
				got++
			}
		}
		if got != 1 {
			t.Fatalf("runtime: rank %d was told %d times", i, got)
		}
	}
	mu.Lock()
	rt := map[bcast.Phase]int{}
	for p, k := range sent {
		rt[p] = k
	}
	mu.Unlock()

	// Simulator: the same broadcast from the same rank.
	g, err := NewGossipSim(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Run(GossipRun{Source: detector, D: ranks.Of(victim), Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	for x := range n {
		if want := int32(1); x != victim && g.deliveries[x] != want {
			t.Fatalf("simulator: rank %d delivered %d times", x, g.deliveries[x])
		}
	}
	rtCorr := rt[bcast.PhaseFwd] + rt[bcast.PhaseBwd] + rt[bcast.PhaseSOS]
	simCorr := int(res.Msgs - res.GossipMsgs)
	t.Logf("%s, detector %d: dissemination runtime %d simulator %d; correction runtime %d simulator %d",
		broadcast, detector, rt[bcast.PhaseGossip], res.GossipMsgs, rtCorr, simCorr)
	if rt[bcast.PhaseNone] != 0 || int64(rt[bcast.PhaseGossip]) != res.GossipMsgs {
		t.Errorf("dissemination: runtime %v, simulator %d gossip messages", rt, res.GossipMsgs)
	}
	if exact && rtCorr != simCorr {
		t.Errorf("correction: runtime %d, simulator %d messages", rtCorr, simCorr)
	}
}

// drain returns the events queued in c without waiting for more.
func drain(c <-chan node.Event) <-chan node.Event {
	out := make(chan node.Event, cap(c))
	defer close(out)
	for {
		select {
		case ev, ok := <-c:
			if !ok {
				return out
			}
			out <- ev
		default:
			return out
		}
	}
}
