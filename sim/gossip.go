package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
)

// GossipAlg names one of seed 002's gossip-based broadcasts (bcast.GossipAlg).
type GossipAlg = bcast.GossipAlg

// The gossip family of seed 002.
const (
	GOS = bcast.GOS
	OCG = bcast.OCG
	CCG = bcast.CCG
	FCG = bcast.FCG
)

// GossipRun is one broadcast of a GossipSim.
type GossipRun struct {
	// Source starts the broadcast (label 0 of the participants' ring).
	Source ranks.Rank
	// D holds the ranks dead before the broadcast and known to the source
	// (not participants).
	D ranks.Set
	// Death, if set, gives per rank the step from which it is dead: it
	// takes no step from then on and receives no message arriving then or
	// later. 0 is dead from the start, unknown to the algorithm (seed 002's
	// originally-inactive nodes); never is alive.
	Death []int32
	// Jitter adds to each message's ℓ+1 steps a delay drawn in [0, Jitter].
	Jitter int
	// Seed seeds the cores' gossip targets (bcast.GossipConfig.Seed) and
	// the jitter.
	Seed uint64
}

// GossipResult is one broadcast's outcome in seed 002's terms. Times are
// in steps of o from the source's start.
type GossipResult struct {
	// Latency is when the last alive rank was done: delivered and done
	// sending (seed 002 §IV.A; bcast.Done's Exit).
	Latency int32
	// LastDelivery is the last delivery among alive ranks (bcast.Done's
	// Delivered).
	LastDelivery int32
	// Msgs counts messages sent (the work), GossipMsgs the dissemination's
	// share of them.
	Msgs, GossipMsgs int64
	// Alive counts the ranks alive at the end other than the source and
	// those of D, Reached those of them that delivered.
	Alive, Reached int32
	// GNodes counts the ranks reached by the dissemination (the source
	// included): their first message was a gossip (or tree) message.
	GNodes int32
	// SOS counts the ranks that sent SOS messages (FCG).
	SOS int32
}

// Consistent reports whether every alive rank delivered.
func (r *GossipResult) Consistent() bool { return r.Reached == r.Alive }

// flying is a message in flight.
type flying struct {
	from, to ranks.Rank
	m        bcast.Message
}

// GossipSim runs broadcasts of the runtime's propagation cores, one
// bcast.Gossip per rank, in virtual time with seed 002's LogP timing: time
// is in steps of o (GossipConfig.Step), a rank sends at most one
// dissemination and one correction message per step (the cores' rule),
// and a message sent in step s arrives in step s + ℓ + 1, ℓ =
// GossipConfig.Ell(). In each step every rank first takes its due steps
// (Tick, booked by Next), then handles the messages arriving in it (Step).
// It keeps its buffers between runs.
type GossipSim struct {
	n   int
	cfg bcast.GossipConfig

	nodes  []*bcast.Gossip
	due    []int32    // the step a rank's Tick is booked for, never if none
	cal    [][]uint32 // ranks booked per step; stale when due moved
	booked int
	flight [][]flying // by arrival step, modulo its length
	queued int
	out    bcast.Out

	// per rank, per run
	reach      []uint8 // 0 not reached, 1 g-node, 2 reached otherwise
	deliveries []int32
	first      []int32 // the step of the first delivery, -1 if none
	done       []bcast.Done
	retired    []bool
	sos        []bool
	lastStep   int32
}

// NewGossipSim returns a simulator of n ranks running cfg (its Seed is
// GossipRun's).
func NewGossipSim(n int, cfg bcast.GossipConfig) (*GossipSim, error) {
	if n < 2 {
		return nil, fmt.Errorf("sim: gossip over %d ranks, want ≥ 2", n)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return &GossipSim{n: n, cfg: cfg, nodes: make([]*bcast.Gossip, n), due: make([]int32, n),
		reach: make([]uint8, n), deliveries: make([]int32, n), first: make([]int32, n),
		done: make([]bcast.Done, n), retired: make([]bool, n), sos: make([]bool, n)}, nil
}

// Config returns the cores' configuration.
func (g *GossipSim) Config() bcast.GossipConfig { return g.cfg }

// Run runs one broadcast. It fails on an error of a core, or on a message
// addressed to a rank of D.
func (g *GossipSim) Run(r GossipRun) (GossipResult, error) {
	n := g.n
	if int64(r.Source) >= int64(n) || r.D.Has(r.Source) || (r.Death != nil && len(r.Death) != n) {
		return GossipResult{}, fmt.Errorf("sim: bad GossipRun (n=%d, source %d, %d deaths)", n, r.Source, len(r.Death))
	}
	cfg := g.cfg
	cfg.Seed = r.Seed
	for i := range g.nodes {
		nd, err := bcast.NewGossip(ranks.Rank(i), n, cfg)
		if err != nil {
			return GossipResult{}, fmt.Errorf("sim: %w", err)
		}
		g.nodes[i] = nd
		g.due[i] = never
		g.reach[i], g.deliveries[i], g.first[i], g.retired[i], g.sos[i] = 0, 0, -1, false, false
	}
	ell := int32(cfg.Ell())
	if span := int(ell) + 2 + r.Jitter; len(g.flight) != span {
		g.flight = make([][]flying, span)
	}
	for i := range g.flight {
		clear(g.flight[i])
		g.flight[i] = g.flight[i][:0]
	}
	for i := range g.cal {
		g.cal[i] = g.cal[i][:0]
	}
	g.booked, g.queued, g.lastStep = 0, 0, 0
	var res GossipResult
	alive := func(x ranks.Rank, s int32) bool { return r.Death == nil || s < r.Death[x] }
	var jitter *rand.Rand
	if r.Jitter > 0 {
		jitter = rand.New(rand.NewPCG(r.Seed, 2))
	}
	o := cfg.Step
	var err error
	queue := func(s int32, from ranks.Rank, sends []bcast.Send) {
		for _, snd := range sends {
			ph := snd.Msg.Hop.Phase
			if ph == bcast.PhaseSOS {
				g.sos[from] = true
			}
			for _, to := range snd.To {
				if r.D.Has(to) && err == nil {
					err = fmt.Errorf("sim: rank %d sent to rank %d, dead before the broadcast", from, to)
				}
				res.Msgs++
				if ph == bcast.PhaseGossip {
					res.GossipMsgs++
				}
				at := s + ell + 1
				if jitter != nil {
					at += int32(jitter.IntN(r.Jitter + 1))
				}
				b := &g.flight[int(at)%len(g.flight)]
				*b = append(*b, flying{from, to, snd.Msg})
				g.queued++
				g.lastStep = max(g.lastStep, s)
			}
		}
	}
	// handled takes in what rank x's core asked for in step s and books
	// its next Tick.
	handled := func(x ranks.Rank, s int32) {
		for range g.out.Deliver {
			g.deliveries[x]++
			if g.first[x] < 0 {
				g.first[x] = s
			}
		}
		queue(s, x, g.out.Sends)
		nd := g.nodes[x]
		if !g.retired[x] && nd.Pending() == 0 {
			if d, ok := nd.LastDone(); ok {
				g.retired[x], g.done[x] = true, d
			}
		}
		g.book(x, nd.Next())
	}
	if alive(r.Source, 0) {
		_, sends := g.nodes[r.Source].Begin(0, bcast.Message{Kind: bcast.Note, D: r.D})
		g.out.Reset()
		g.out.Deliver = append(g.out.Deliver, bcast.Message{}) // the caller's delivery
		g.out.Sends = append(g.out.Sends, sends...)
		g.reach[r.Source] = 1
		handled(r.Source, 0)
	}
	for s := int32(1); err == nil && (g.booked > 0 || g.queued > 0); s++ {
		if s == never {
			return res, fmt.Errorf("sim: the broadcast never ended")
		}
		now := int64(s) * o
		if int(s) < len(g.cal) {
			for _, x := range g.cal[s] {
				if g.due[x] != s {
					continue // booked again since
				}
				g.due[x] = never
				g.booked--
				if !alive(ranks.Rank(x), s) {
					continue
				}
				g.out.Reset()
				g.nodes[x].Tick(now, &r.D, &g.out)
				handled(ranks.Rank(x), s)
			}
			g.cal[s] = g.cal[s][:0]
		}
		b := &g.flight[int(s)%len(g.flight)]
		for i := range *b {
			f := &(*b)[i]
			g.queued--
			if !alive(f.to, s) {
				continue
			}
			if g.reach[f.to] == 0 {
				g.reach[f.to] = 2
				if f.m.Hop.Phase == bcast.PhaseGossip {
					g.reach[f.to] = 1
				}
			}
			g.out.Reset()
			if e := g.nodes[f.to].Step(now, f.from, f.m, &r.D, &g.out); e != nil {
				return res, fmt.Errorf("sim: rank %d: %w", f.to, e)
			}
			handled(f.to, s)
			g.lastStep = max(g.lastStep, s)
		}
		clear(*b)
		*b = (*b)[:0]
	}
	for x := range n {
		id := ranks.Rank(x)
		if r.D.Has(id) || !alive(id, never-1) {
			continue
		}
		if id != r.Source {
			res.Alive++
			if g.deliveries[x] > 0 {
				res.Reached++
			}
		}
		if g.retired[x] {
			res.LastDelivery = max(res.LastDelivery, g.done[x].Delivered)
			res.Latency = max(res.Latency, g.done[x].Exit)
		}
	}
	for x := range n {
		if g.reach[x] == 1 {
			res.GNodes++
		}
		if g.sos[x] {
			res.SOS++
		}
	}
	return res, err
}

// book books rank x's next Tick for next (a core's Next: 0 for none).
func (g *GossipSim) book(x ranks.Rank, next int64) {
	if g.due[x] != never {
		g.booked--
		g.due[x] = never
	}
	if next == 0 {
		return
	}
	s := int32(min((next+g.cfg.Step-1)/g.cfg.Step, never-1))
	for int(s) >= len(g.cal) {
		g.cal = append(g.cal, nil)
	}
	g.cal[s] = append(g.cal[s], uint32(x))
	g.due[x] = s
	g.booked++
}

// CoreGossipRun is one broadcast for RunCoreGossip: a GossipRun over N
// ranks running Cfg.
type CoreGossipRun struct {
	Cfg    bcast.GossipConfig
	N      int
	Source ranks.Rank
	// D holds the ranks dead before the broadcast (not participants).
	D ranks.Set
	// Death, if set, gives per rank the step from which it is dead (it
	// takes no step and receives nothing from then on); never: alive.
	Death  []int32
	Jitter int
	Seed   uint64
}

// CoreGossipResult is what the ranks did, as the driver saw it.
type CoreGossipResult struct {
	// Msgs counts messages sent.
	Msgs int
	// Deliveries counts deliveries per rank (the source's included).
	Deliveries []int
	// First is the step of each rank's first delivery, -1 if none.
	First []int32
	// LastDelivery and LastStep are the step of the last delivery handed
	// to a driver and the last step in which any rank sent or handled a
	// message.
	LastDelivery, LastStep int32
	// Pending counts broadcasts still held by live ranks at the end (0
	// unless a core failed to finish).
	Pending int
	// Alive counts the live participants other than the source, Reached
	// those that delivered.
	Alive, Reached int
}

// RunCoreGossip runs r once on a fresh GossipSim and reports per rank.
func RunCoreGossip(r CoreGossipRun) (CoreGossipResult, error) {
	res := CoreGossipResult{Deliveries: make([]int, r.N), First: make([]int32, r.N)}
	g, err := NewGossipSim(r.N, r.Cfg)
	if err != nil {
		return res, err
	}
	gr, err := g.Run(GossipRun{Source: r.Source, D: r.D, Death: r.Death, Jitter: r.Jitter, Seed: r.Seed})
	res.Msgs, res.Alive, res.Reached, res.LastStep = int(gr.Msgs), int(gr.Alive), int(gr.Reached), g.lastStep
	for x := range r.N {
		res.Deliveries[x], res.First[x] = int(g.deliveries[x]), g.first[x]
		if g.first[x] >= 0 {
			res.LastDelivery = max(res.LastDelivery, g.first[x])
		}
		id := ranks.Rank(x)
		if !r.D.Has(id) && (r.Death == nil || r.Death[x] == never) {
			res.Pending += g.nodes[x].Pending()
		}
	}
	return res, err
}
