package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/ranks"
)

// CoreGossipRun is one broadcast of the runtime's corrected gossip
// (bcast.Gossip, one per rank) in virtual time, in steps of Cfg.Step: at
// each step every rank first takes its due steps (Tick), then handles the
// messages arriving in that step. A message sent in step s arrives in step
// s + ℓ + 1 (+ a jitter drawn in [0, Jitter]), ℓ = Cfg.Ell(). GossipSim
// is the fast model of the same algorithms for large studies; this driver
// runs the very code the node runtime runs.
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

// CoreGossipResult is what the ranks did.
type CoreGossipResult struct {
	// Msgs counts messages sent.
	Msgs int
	// Deliveries counts deliveries per rank (the source's included).
	Deliveries []int
	// First is the step of each rank's first delivery, -1 if none.
	First []int32
	// LastDelivery and LastStep are the last delivery and the last step
	// in which any rank sent or handled a message.
	LastDelivery, LastStep int32
	// Pending counts broadcasts still held by live ranks at the end (0
	// unless a core failed to finish).
	Pending int
	// Alive counts the live participants other than the source, Reached
	// those that delivered.
	Alive, Reached int
}

// RunCoreGossip runs r. It fails on any error a core returns or on a
// message addressed to a rank in D.
func RunCoreGossip(r CoreGossipRun) (CoreGossipResult, error) {
	n := r.N
	res := CoreGossipResult{Deliveries: make([]int, n), First: make([]int32, n)}
	if int64(r.Source) >= int64(n) || r.D.Has(r.Source) || (r.Death != nil && len(r.Death) != n) {
		return res, fmt.Errorf("sim: bad CoreGossipRun (n=%d, source %d, %d deaths)", n, r.Source, len(r.Death))
	}
	nodes := make([]*bcast.Gossip, n)
	for i := range nodes {
		cfg := r.Cfg
		cfg.Seed = r.Seed
		g, err := bcast.NewGossip(ranks.Rank(i), n, cfg)
		if err != nil {
			return res, err
		}
		nodes[i] = g
		res.First[i] = -1
	}
	alive := func(x ranks.Rank, s int32) bool { return r.Death == nil || s < r.Death[x] }
	type flying struct {
		from, to ranks.Rank
		m        bcast.Message
	}
	flight := map[int32][]flying{}
	rng := rand.New(rand.NewPCG(r.Seed, 2))
	ell := int32(r.Cfg.Ell())
	var err error
	queue := func(s int32, from ranks.Rank, sends []bcast.Send) {
		for _, snd := range sends {
			for _, to := range snd.To {
				if r.D.Has(to) && err == nil {
					err = fmt.Errorf("sim: rank %d sent to rank %d, dead before the broadcast", from, to)
				}
				res.Msgs++
				at := s + ell + 1
				if r.Jitter > 0 {
					at += int32(rng.IntN(r.Jitter + 1))
				}
				flight[at] = append(flight[at], flying{from, to, snd.Msg})
				res.LastStep = max(res.LastStep, s)
			}
		}
	}
	delivered := func(x ranks.Rank, s int32, ms []bcast.Message) {
		for range ms {
			res.Deliveries[x]++
			if res.First[x] < 0 {
				res.First[x] = s
			}
			res.LastDelivery = max(res.LastDelivery, s)
		}
	}
	o := r.Cfg.Step
	_, sends := nodes[r.Source].Begin(0, bcast.Message{Kind: bcast.Note, D: r.D})
	delivered(r.Source, 0, []bcast.Message{{}})
	queue(0, r.Source, sends)
	active := map[ranks.Rank]bool{r.Source: true} // ranks holding broadcasts
	for s := int32(1); err == nil; s++ {
		if s == never {
			return res, fmt.Errorf("sim: the broadcast never ended")
		}
		now := int64(s) * o
		for x := range active {
			g := nodes[x]
			if !alive(x, s) || g.Next() == 0 {
				delete(active, x)
				continue
			}
			if g.Next() <= now {
				var out bcast.Out
				g.Tick(now, &r.D, &out)
				delivered(x, s, out.Deliver)
				queue(s, x, out.Sends)
			}
		}
		for _, f := range flight[s] {
			if !alive(f.to, s) {
				continue
			}
			var out bcast.Out
			if e := nodes[f.to].Step(now, f.from, f.m, &r.D, &out); e != nil {
				return res, fmt.Errorf("sim: rank %d: %w", f.to, e)
			}
			delivered(f.to, s, out.Deliver)
			queue(s, f.to, out.Sends)
			active[f.to] = true
			res.LastStep = max(res.LastStep, s)
		}
		delete(flight, s)
		if len(active) == 0 && len(flight) == 0 {
			break
		}
	}
	for x := range n {
		id := ranks.Rank(x)
		if !alive(id, never-1) || r.D.Has(id) {
			continue
		}
		res.Pending += nodes[x].Pending()
		if id != r.Source {
			res.Alive++
			if res.Deliveries[x] > 0 {
				res.Reached++
			}
		}
	}
	return res, err
}
