package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/vigil-hpc/vigil/bcast"
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

// maxF bounds FCG's f: the lists of known g-nodes travel inline.
const maxF = bcast.MaxF

// GossipConfig parameterises one gossip broadcast. Time is counted in
// steps of o (seed 002 takes L a multiple of o).
type GossipConfig struct {
	Alg GossipAlg
	// N is the number of nodes, the static name space of the ring.
	N int
	// T: gossip messages are sent in steps 1..T−1 (Algorithm 1's
	// "if time < T").
	T int
	// C is OCG's number of correction messages per g-node.
	C int
	// F is FCG's number of tolerated failures during the correction
	// (1..3).
	F int
	// Ell is L/o: a message sent in step s is delivered at time s + Ell + 1
	// and its receiver can send from step s + Ell + 2 on.
	Ell int
	// Timeout is how many steps after its first correction message an FCG
	// c-node waits for f+1 g-nodes before it starts SOS (0: 2N + 2ℓ + 4,
	// longer than any g-node can take to give up and start SOS itself).
	Timeout int
	// NoSOS disables FCG's SOS mode (seed 002's Lemma 4 and Claim 5
	// analysis).
	NoSOS bool
	// Tree, when set, replaces the random gossip phase by a deterministic
	// tree (a corrected tree, not in seed 002): node x, reached at step τ,
	// sends to its i-th child Tree.to[off[x]+i] in step τ+1+i while that
	// step is before T. Table indices are ring positions and the root is
	// 0. The correction phase (Alg) is unchanged, so the variant keeps
	// Alg's delivery guarantee, which holds for any set of g-nodes.
	Tree *FloodTable
}

// Validate reports the first bad field.
func (c *GossipConfig) Validate() error {
	switch {
	case c.N < 2:
		return fmt.Errorf("sim: GossipConfig.N = %d, want ≥ 2", c.N)
	case c.T < 1:
		return fmt.Errorf("sim: GossipConfig.T = %d, want ≥ 1", c.T)
	case c.Ell < 0:
		return fmt.Errorf("sim: GossipConfig.Ell = %d, want ≥ 0", c.Ell)
	case c.Alg == OCG && c.C < 0:
		return fmt.Errorf("sim: GossipConfig.C = %d, want ≥ 0", c.C)
	case c.Alg == FCG && (c.F < 1 || c.F > maxF):
		return fmt.Errorf("sim: GossipConfig.F = %d, want in [1, %d]", c.F, maxF)
	case c.Alg > FCG:
		return fmt.Errorf("sim: unknown gossip algorithm %d", c.Alg)
	case c.Tree != nil && c.Tree.M != c.N:
		return fmt.Errorf("sim: GossipConfig.Tree has %d nodes, want N = %d", c.Tree.M, c.N)
	}
	return nil
}

// cgMsg is one correction or SOS message in flight.
type cgMsg struct {
	to uint32
	bcast.CorrMsg
}

// GossipResult is one broadcast's outcome. Times are in steps of o from
// the root's start.
type GossipResult struct {
	// Latency is the time the last alive node was done: delivered and, for
	// the nodes that send, done sending (seed 002 §IV.A).
	Latency int32
	// LastDelivery is the last delivery among alive nodes.
	LastDelivery int32
	// Msgs counts messages sent (the work).
	Msgs int64
	// GossipMsgs counts the gossip phase's share of Msgs.
	GossipMsgs int64
	// Alive counts alive nodes other than the root at the end, Reached
	// those of them that delivered.
	Alive, Reached int32
	// GNodes counts nodes reached by the gossip phase (root included).
	GNodes int32
	// SOS counts nodes that entered SOS mode.
	SOS int32
}

// Consistent reports whether every alive node delivered.
func (r *GossipResult) Consistent() bool { return r.Reached == r.Alive }

// GossipSim runs gossip broadcasts; it keeps its buffers between runs.
type GossipSim struct {
	cfg   GossipConfig
	nodes []bcast.CorrNode
	death []int32

	// gossip phase
	pool     []uint32 // alive nodes not yet targeted, pool[:npool]
	pos      []int32  // index of each node in pool, -1 if out
	hitAt    []int32  // step at which a node was targeted, for de-duplication
	arrivals [][]uint32
	dying    [][]uint32

	// correction phase
	inflight [][]cgMsg
	active   []uint32
	joined   []uint32
	sos      int32
	noSkip   bool // tests: deliver every message
}

// NewGossipSim returns a simulator for cfg.
func NewGossipSim(cfg GossipConfig) (*GossipSim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2*cfg.N + 2*cfg.Ell + 4
	}
	n := cfg.N
	return &GossipSim{cfg: cfg, nodes: make([]bcast.CorrNode, n), death: make([]int32, n),
		pool: make([]uint32, n), pos: make([]int32, n), hitAt: make([]int32, n),
		inflight: make([][]cgMsg, cfg.Ell+2)}, nil
}

// Config returns the configuration.
func (g *GossipSim) Config() GossipConfig { return g.cfg }

// Run simulates one broadcast from node 0. death[x] is the step from which
// x is dead (it sends nothing in steps ≥ death[x] and receives nothing
// delivered at time ≥ death[x]): 0 or less for a node dead from the start,
// never for one that stays alive. r draws the gossip targets.
func (g *GossipSim) Run(death []int32, r *rand.Rand) GossipResult {
	c := &g.cfg
	ell := int32(c.Ell)
	copy(g.death, death)
	var res GossipResult
	nodes := g.nodes
	for i := range nodes {
		nodes[i].Reset()
	}
	if g.death[0] <= 0 {
		return g.finish(res)
	}

	// Dissemination phase: random gossip, or the tree.
	T := int32(c.T)
	horizon := T + ell + 2
	if cap(g.arrivals) < int(horizon)+1 {
		g.arrivals = make([][]uint32, horizon+1)
		g.dying = make([][]uint32, horizon+1)
	}
	arrivals, dying := g.arrivals[:horizon+1], g.dying[:horizon+1]
	for i := range arrivals {
		arrivals[i] = arrivals[i][:0]
		dying[i] = dying[i][:0]
	}
	if c.Tree != nil {
		g.treePhase(&res, arrivals)
	} else {
		g.gossipPhase(&res, arrivals, dying, r)
	}
	res.Msgs = res.GossipMsgs
	for x := range nodes {
		if nodes[x].State == bcast.StateG {
			res.GNodes++
		}
	}
	if c.Alg == GOS {
		// Done when the gossip stops; a node reached later is done then.
		for x := range nodes {
			nd := &nodes[x]
			if nd.State == bcast.StateG {
				nd.State, nd.Exit = bcast.StateDone, max(nd.Tau, T-1)
			}
		}
		return g.finish(res)
	}
	g.correct(&res)
	return g.finish(res)
}

// gossipPhase is the random gossip phase of seed 002: it leaves the
// g-nodes in state bcast.StateG with their Tau. At step s every colored, alive node
// with tau < s < T sends one message to a uniform random other node. Only
// the first message to reach an alive, unreached node matters (the others
// are ignored by every variant), so the targets are drawn only among the
// not yet targeted nodes: a message hits that pool with probability
// |pool|/(N−1), the number of hits among the senders is drawn by geometric
// skips.
func (g *GossipSim) gossipPhase(res *GossipResult, arrivals, dying [][]uint32, r *rand.Rand) {
	c := &g.cfg
	n := c.N
	ell := int32(c.Ell)
	nodes := g.nodes
	T := int32(c.T)
	npool := 0
	for x := 1; x < n; x++ {
		g.hitAt[x] = -1
		if g.death[x] > 0 {
			g.pos[x] = int32(npool)
			g.pool[npool] = uint32(x)
			npool++
		} else {
			g.pos[x] = -1
		}
	}
	nodes[0].Reached(0)
	senders := int64(0) // alive g-nodes gossiping
	if T > 1 {
		senders = 1
		if d := g.death[0]; d < T {
			dying[d] = append(dying[d], 0)
		}
	}
	for s := int32(1); s < T; s++ {
		// Nodes reached at s−1 gossip from s on.
		for _, x := range arrivals[s-1] {
			if g.death[x] <= s-1 {
				continue // died before the message arrived
			}
			nodes[x].Reached(s - 1)
			senders++
			if d := g.death[x]; d < T {
				dying[max(d, s)] = append(dying[max(d, s)], x)
			}
		}
		senders -= int64(len(dying[s]))
		res.GossipMsgs += senders
		if npool == 0 || senders == 0 {
			continue
		}
		p := float64(npool) / float64(n-1)
		at := s + ell + 1
		for k := int64(geometric(r, p)); k < senders; k += 1 + int64(geometric(r, p)) {
			x := g.pool[r.IntN(npool)]
			if g.hitAt[x] == s {
				continue
			}
			g.hitAt[x] = s
			arrivals[at] = append(arrivals[at], x)
		}
		// Drop this step's targets from the pool.
		for _, x := range arrivals[at] {
			if i := g.pos[x]; i >= 0 {
				npool--
				last := g.pool[npool]
				g.pool[i], g.pos[last] = last, i
				g.pos[x] = -1
			}
		}
	}
	for s := max(T-1, 0); s <= T+ell; s++ {
		for _, x := range arrivals[s] {
			if g.death[x] > s {
				nodes[x].Reached(s)
			}
		}
	}
}

// treePhase is the deterministic dissemination of GossipConfig.Tree: the
// same timing as gossip (a node reached at τ sends from step τ+1 on, one
// message per step, each delivered ℓ+1 later) but to its tree children.
func (g *GossipSim) treePhase(res *GossipResult, arrivals [][]uint32) {
	c := &g.cfg
	t := c.Tree
	ell := int32(c.Ell)
	T := int32(c.T)
	nodes := g.nodes
	arrivals[0] = append(arrivals[0], 0)
	for s := int32(0); s < int32(len(arrivals)); s++ {
		for _, x := range arrivals[s] {
			if g.death[x] <= s || nodes[x].State == bcast.StateG {
				continue
			}
			nodes[x].Reached(s)
			lo, hi := t.off[x], t.off[x+1]
			for i := lo; i < hi; i++ {
				st := s + 1 + (i - lo)
				if st >= T || g.death[x] <= st {
					break
				}
				res.GossipMsgs++
				y := t.to[i]
				if at := st + ell + 1; g.death[y] > at {
					arrivals[at] = append(arrivals[at], y)
				}
			}
		}
	}
}

// finish fills the counts from the node states.
func (g *GossipSim) finish(res GossipResult) GossipResult {
	for x := range g.nodes {
		nd := &g.nodes[x]
		if g.death[x] != never {
			continue
		}
		if x != 0 {
			res.Alive++
		}
		if nd.State != bcast.StateDone {
			continue
		}
		if x != 0 {
			res.Reached++
		}
		res.LastDelivery = max(res.LastDelivery, nd.Tau)
		res.Latency = max(res.Latency, nd.Exit)
	}
	return res
}

// correct runs the correction phase, from step T + ℓ + 1 on, when every
// gossip message has arrived and every g-node knows it is one.
func (g *GossipSim) correct(res *GossipResult) {
	c := &g.cfg
	n := int32(c.N)
	ell := int32(c.Ell)
	nodes := g.nodes
	nb := int32(len(g.inflight))
	for i := range g.inflight {
		g.inflight[i] = g.inflight[i][:0]
	}
	g.active, g.joined, g.sos = g.active[:0], g.joined[:0], 0
	for x := range nodes {
		if nodes[x].State == bcast.StateG {
			g.active = append(g.active, uint32(x))
			nodes[x].BeginCorrection()
		}
	}
	pending := 0
	cp := bcast.CorrParams{Alg: c.Alg, N: n, C: c.C, F: c.F, Timeout: int32(c.Timeout), NoSOS: c.NoSOS}
	var s int32     // the current step
	var from uint32 // the node taking it
	send := func(to uint32, kind bcast.CorrKind, list []uint32) {
		res.Msgs++
		// A message to a node on which it can have no effect is only
		// counted: a node that exited or died, an OCG g-node, an FCG g-node
		// whose list for that side is settled.
		switch t := &nodes[to]; {
		case g.noSkip:
		case t.State == bcast.StateDone || t.State == bcast.StateSOS || g.death[to] <= s+ell+1:
			return
		case kind == bcast.CorrSOS:
		case c.Alg == OCG && t.State == bcast.StateG:
			return
		case c.Alg == FCG && t.State == bcast.StateG && t.Settled(kind):
			return
		}
		m := cgMsg{to: to, CorrMsg: bcast.CorrMsg{From: from, Kind: kind, N: uint8(len(list))}}
		copy(m.List[:], list)
		b := &g.inflight[(s+ell+1)%nb]
		*b = append(*b, m)
		pending++
	}
	for s = int32(c.T) + ell + 1; len(g.active) > 0 || pending > 0; s++ {
		// Messages delivered at s−1 are seen from step s on.
		b := &g.inflight[(s-1)%nb]
		for k := range *b {
			m := &(*b)[k]
			pending--
			if g.death[m.to] <= s-1 {
				continue
			}
			joined, sos := nodes[m.to].Receive(&cp, m.to, &m.CorrMsg, s-1)
			if joined {
				g.joined = append(g.joined, m.to)
			}
			if sos {
				g.sos++
			}
		}
		*b = (*b)[:0]
		// Every active node takes its step.
		kept := g.active[:0]
		for _, x := range g.active {
			nd := &nodes[x]
			if g.death[x] <= s {
				nd.State = bcast.StateDead
				continue
			}
			from = x
			active, sos := nd.Step(&cp, x, s, send)
			if sos {
				g.sos++
			}
			if active {
				kept = append(kept, x)
			}
		}
		g.active = kept
		// Nodes that became active while receiving (c-nodes, SOS) join
		// from the next step.
		g.active = append(g.active, g.joined...)
		g.joined = g.joined[:0]
	}
	res.SOS = g.sos
}
