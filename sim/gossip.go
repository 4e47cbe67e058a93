package sim

import (
	"fmt"
	"math/rand/v2"
)

// GossipAlg names one of seed 002's gossip-based broadcasts.
type GossipAlg uint8

// The gossip family of seed 002.
const (
	// GOS is plain gossip (§IV.B.1): every colored node sends to a random
	// node every o until the global time T. Weakly consistent.
	GOS GossipAlg = iota
	// OCG is Opportunistic Corrected-Gossip (Algorithm 1): gossip until
	// T, then every g-node sends C correction messages alternately to
	// i+1, i−1, i+2, i−2, … on the ring.
	OCG
	// CCG is Checked Corrected-Gossip (Algorithm 2): the correction goes
	// on in each direction until the g-node has sent to the closest g-node
	// on that side, learned from the first message it gets from it.
	// Consistent if no node fails during the correction.
	CCG
	// FCG is Failure-proof Corrected-Gossip (Algorithm 3): the correction
	// goes on until the g-node knows f+1 g-nodes on each side and has sent
	// final messages past the (f+1)-th on each side; c-nodes deliver once
	// they know f+1 g-nodes; SOS mode floods everyone when that fails.
	// Consistent if at most f nodes fail during the correction.
	FCG
)

func (a GossipAlg) String() string {
	switch a {
	case GOS:
		return "GOS"
	case OCG:
		return "OCG"
	case CCG:
		return "CCG"
	case FCG:
		return "FCG"
	}
	return fmt.Sprintf("GossipAlg(%d)", uint8(a))
}

// maxF bounds FCG's f: the lists of known g-nodes travel inline.
const maxF = 3

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

// Node states.
const (
	stNone uint8 = iota // not reached
	stG                 // g-node: reached by gossip
	stC                 // c-node: reached by the correction, waiting (FCG)
	stSOS               // sending SOS to everyone
	stDone              // delivered and exited
	stDead              // crashed
)

// message kinds of the correction phase
const (
	mFwd uint8 = iota // travelling to higher ranks (from behind the receiver)
	mBwd              // travelling to lower ranks (from ahead of the receiver)
	mSOS
)

// cgNode is one node's core state. Directions and sides share an index:
// 0 is forward (+1, the side ahead of the node... see side), 1 backward.
type cgNode struct {
	state uint8
	stop  [2]bool  // no more sends in that direction (for now)
	final [2]bool  // FCG: final round started in that direction
	nk    [2]uint8 // FCG: known g-nodes on each side
	nc    uint8    // FCG c-node: known distinct g-nodes
	off   [2]int32 // next distance to send to, per direction
	lim   [2]int32 // CCG: distance of the closest g-node, per direction
	tau   int32    // when it was reached (delivered, for GOS/OCG/CCG)
	exit  int32    // when it was done (delivered and exited)
	last  int32    // its last send
	step  int32    // correction steps taken
	dl    int32    // FCG c-node: SOS deadline
	// FCG lists, closest first: k[0] the g-nodes behind (learned from
	// forward messages), k[1] those ahead (from backward messages). A
	// forward message carries its sender's k[0], a backward one its k[1].
	k [2][maxF + 1]uint32
}

// cgMsg is one correction or SOS message in flight.
type cgMsg struct {
	to, from uint32
	kind     uint8
	n        uint8
	list     [maxF + 1]uint32
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
	nodes []cgNode
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
	return &GossipSim{cfg: cfg, nodes: make([]cgNode, n), death: make([]int32, n),
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
		nodes[i] = cgNode{tau: never, exit: never, lim: [2]int32{never, never}}
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
		if nodes[x].state == stG {
			res.GNodes++
		}
	}
	if c.Alg == GOS {
		// Done when the gossip stops; a node reached later is done then.
		for x := range nodes {
			nd := &nodes[x]
			if nd.state == stG {
				nd.state, nd.exit = stDone, max(nd.tau, T-1)
			}
		}
		return g.finish(res)
	}
	g.correct(&res)
	return g.finish(res)
}

// gossipPhase is the random gossip phase of seed 002: it leaves the
// g-nodes in state stG with their tau. At step s every colored, alive node
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
	nodes[0].state, nodes[0].tau = stG, 0
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
			nodes[x].state, nodes[x].tau = stG, s-1
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
				nodes[x].state, nodes[x].tau = stG, s
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
			if g.death[x] <= s || nodes[x].state == stG {
				continue
			}
			nodes[x].state, nodes[x].tau = stG, s
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
		if nd.state != stDone {
			continue
		}
		if x != 0 {
			res.Reached++
		}
		res.LastDelivery = max(res.LastDelivery, nd.tau)
		res.Latency = max(res.Latency, nd.exit)
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
		if nodes[x].state == stG {
			g.active = append(g.active, uint32(x))
			nodes[x].off = [2]int32{1, 1}
		}
	}
	pending := 0
	send := func(s int32, from, to uint32, kind uint8, list []uint32) {
		res.Msgs++
		// A message to a node on which it can have no effect is only
		// counted: a node that exited or died, an OCG g-node, an FCG g-node
		// whose list for that side is settled.
		switch t := &nodes[to]; {
		case g.noSkip:
		case t.state == stDone || t.state == stSOS || g.death[to] <= s+ell+1:
			return
		case kind == mSOS:
		case c.Alg == OCG && t.state == stG:
			return
		case c.Alg == FCG && t.state == stG && t.final[kind]:
			return
		}
		m := cgMsg{to: to, from: from, kind: kind, n: uint8(len(list))}
		copy(m.list[:], list)
		b := &g.inflight[(s+ell+1)%nb]
		*b = append(*b, m)
		pending++
	}
	for s := int32(c.T) + ell + 1; len(g.active) > 0 || pending > 0; s++ {
		// Messages delivered at s−1 are seen from step s on.
		b := &g.inflight[(s-1)%nb]
		for k := range *b {
			m := &(*b)[k]
			pending--
			if g.death[m.to] <= s-1 {
				continue
			}
			g.receive(m, s-1)
		}
		*b = (*b)[:0]
		// Every active node takes its step.
		kept := g.active[:0]
		for _, x := range g.active {
			nd := &nodes[x]
			if g.death[x] <= s {
				nd.state = stDead
				continue
			}
			if g.stepNode(x, nd, s, n, send) {
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

// dist returns the distance from x to y on side 0 (behind x, lower ranks
// mod n) or side 1 (ahead, higher ranks).
func dist(x, y uint32, side uint8, n int32) int32 {
	d := int32(y) - int32(x)
	if side == 0 {
		d = -d
	}
	if d < 0 {
		d += n
	}
	return d
}

// target returns the rank at distance off from x in direction dir.
func target(x uint32, dir uint8, off, n int32) uint32 {
	if dir == 0 {
		return uint32((int32(x) + off) % n)
	}
	return uint32(((int32(x)-off)%n + n) % n)
}

// merge adds y to x's sorted list of the closest f+1 g-nodes on side.
func merge(list *[maxF + 1]uint32, cnt *uint8, x, y uint32, side uint8, n int32, f int) {
	if y == x {
		return
	}
	dy := dist(x, y, side, n)
	k := int(*cnt)
	i := 0
	for ; i < k; i++ {
		if list[i] == y {
			return
		}
		if dist(x, list[i], side, n) > dy {
			break
		}
	}
	for j := i; j < k; j++ {
		if list[j] == y {
			// Already known farther: impossible, distances are fixed.
			return
		}
	}
	if i > f {
		return
	}
	if k == f+1 {
		k-- // drop the farthest
	} else {
		*cnt++
	}
	copy(list[i+1:k+1], list[i:k])
	list[i] = y
}

// receive handles message m, delivered to m.to at time tau.
func (g *GossipSim) receive(m *cgMsg, tau int32) {
	c := &g.cfg
	n := int32(c.N)
	x := m.to
	nd := &g.nodes[x]
	if nd.state == stDone || nd.state == stDead || nd.state == stSOS {
		return
	}
	if m.kind == mSOS {
		g.enterSOS(x, nd)
		return
	}
	side := m.kind // a forward message comes from behind: side 0
	switch c.Alg {
	case OCG, CCG:
		if nd.state == stNone { // a c-node: delivers, sends nothing
			nd.state, nd.tau, nd.exit = stDone, tau, tau
			return
		}
		if c.Alg == CCG {
			// The first message from a side bounds the sends toward it:
			// a forward message bounds the backward sends.
			d := dist(x, m.from, side, n)
			dir := 1 - side
			nd.lim[dir] = min(nd.lim[dir], d)
		}
	case FCG:
		switch nd.state {
		case stNone:
			nd.state, nd.dl = stC, tau+int32(c.Timeout)
			g.joined = append(g.joined, x)
			fallthrough
		case stC:
			// A c-node collects distinct g-nodes, whichever side.
			for i := -1; i < int(m.n); i++ {
				y := m.from
				if i >= 0 {
					y = m.list[i]
				}
				known := y == x
				for _, z := range nd.k[0][:nd.nc] {
					known = known || z == y
				}
				if !known && int(nd.nc) <= c.F {
					nd.k[0][nd.nc] = y
					nd.nc++
				}
			}
			if int(nd.nc) > c.F {
				nd.state, nd.tau, nd.exit = stDone, tau, tau
			}
		case stG:
			if nd.final[side] {
				return // the list that final round carries is settled
			}
			merge(&nd.k[side], &nd.nk[side], x, m.from, side, n, c.F)
			for _, y := range m.list[:m.n] {
				merge(&nd.k[side], &nd.nk[side], x, y, side, n, c.F)
			}
		}
	}
}

// enterSOS starts SOS mode at x: it will send to every other node.
func (g *GossipSim) enterSOS(x uint32, nd *cgNode) {
	if nd.state == stNone {
		g.joined = append(g.joined, x)
	}
	nd.state = stSOS
	nd.off[0] = 1
	g.sos++
}

// stepNode is node x's action in step s; it returns whether x stays active.
func (g *GossipSim) stepNode(x uint32, nd *cgNode, s, n int32, send func(int32, uint32, uint32, uint8, []uint32)) bool {
	c := &g.cfg
	switch nd.state {
	case stC:
		if s >= nd.dl {
			if c.NoSOS {
				return false // gives up waiting: stays uncolored
			}
			g.enterSOS(x, nd)
			return g.stepNode(x, nd, s, n, send)
		}
		return true
	case stSOS:
		send(s, x, uint32((int32(x)+nd.off[0])%n), mSOS, nil)
		nd.off[0]++
		if nd.off[0] >= n {
			nd.state, nd.tau, nd.exit = stDone, s, s
			return false
		}
		return true
	case stG:
	default:
		return false
	}
	j := nd.step + 1
	nd.step++
	dir := uint8((j - 1) % 2)
	switch c.Alg {
	case OCG:
		if j > int32(c.C) {
			nd.state, nd.exit = stDone, max(nd.tau, s-1)
			return false
		}
		send(s, x, target(x, dir, (j+1)/2, n), dir, nil)
		if j == int32(c.C) {
			nd.state, nd.exit = stDone, s
			return false
		}
		return true
	case CCG:
		off := (j + 1) / 2
		if off > nd.lim[dir] || off >= n {
			nd.stop[dir] = true
		}
		if !nd.stop[dir] {
			send(s, x, target(x, dir, off, n), dir, nil)
			nd.last = s
		}
		if nd.stop[0] && nd.stop[1] {
			nd.state, nd.exit = stDone, max(nd.tau, nd.last, s-1)
			return false
		}
		return true
	}
	// FCG.
	f := c.F
	if !nd.final[dir] && int(nd.nk[dir]) > f {
		nd.final[dir], nd.off[dir], nd.stop[dir] = true, 1, false
	}
	if o := 1 - dir; int(nd.nk[o]) > f && nd.off[dir] > dist(x, nd.k[o][f], o, n) {
		nd.stop[dir] = true
	}
	if !nd.stop[dir] {
		if nd.off[dir] >= n {
			if !c.NoSOS {
				g.enterSOS(x, nd)
				return true
			}
			nd.stop[dir], nd.final[dir] = true, true
		} else {
			send(s, x, target(x, dir, nd.off[dir], n), dir, nd.k[dir][:nd.nk[dir]])
			nd.off[dir]++
			nd.last = s
		}
	}
	if nd.final[0] && nd.final[1] && nd.stop[0] && nd.stop[1] {
		e := max(nd.tau, nd.last, s-1)
		nd.state, nd.tau, nd.exit = stDone, e, e
		return false
	}
	return true
}
