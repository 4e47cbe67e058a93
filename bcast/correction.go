package bcast

import (
	"fmt"
	"math"
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

// MaxF bounds FCG's f: the lists of known g-nodes travel inline.
const MaxF = 3

// Never is a step that never comes.
const Never = math.MaxInt32

// CorrKind is the kind of a correction-phase message.
type CorrKind uint8

const (
	// CorrFwd travels to higher ring positions: it comes from behind the
	// receiver.
	CorrFwd CorrKind = iota
	// CorrBwd travels to lower ring positions: it comes from ahead.
	CorrBwd
	// CorrSOS is FCG's SOS mode: its receiver floods everyone too.
	CorrSOS
)

// CorrState is a node's state in a corrected gossip.
type CorrState uint8

const (
	StateNone CorrState = iota // not reached
	StateG                     // g-node: reached by the gossip (or tree) phase
	StateC                     // FCG c-node: reached by the correction, waiting for f+1 g-nodes
	StateSOS                   // sending SOS to everyone
	StateDone                  // delivered and exited
	StateDead                  // crashed (set by a simulator)
)

// CorrParams parameterises the correction phase. Positions are on a ring
// of N nodes (the participants, labelled from the root at 0); time is in
// steps of o, one send per step.
type CorrParams struct {
	Alg GossipAlg
	N   int32
	// C is OCG's number of correction messages per g-node.
	C int
	// F is FCG's number of failures tolerated during the correction
	// (1..MaxF).
	F int
	// Timeout is how many steps after its first correction message an FCG
	// c-node waits for f+1 g-nodes before it starts SOS.
	Timeout int32
	// NoSOS disables FCG's SOS mode (seed 002's Lemma 4 and Claim 5).
	NoSOS bool
}

// DefaultTimeout is the FCG c-node timeout used when none is given:
// 2N + 2ℓ + 4 steps, longer than any g-node can take to give up and start
// SOS itself.
func DefaultTimeout(n, ell int) int32 { return int32(2*n + 2*ell + 4) }

// CorrMsg is one correction-phase message: its sender's ring position, its
// kind and, for FCG, the sender's list of known g-nodes on the side the
// message comes from (a forward message carries its sender's g-nodes
// behind it, a backward one those ahead), closest first.
type CorrMsg struct {
	From uint32
	Kind CorrKind
	N    uint8
	List [MaxF + 1]uint32
}

// CorrNode is one node's state in the correction phase of seed 002's
// corrected gossip (Algorithms 1–3, SOS included). It is a pure state
// machine: the driver (the runtime's Gossip, or the simulator) says when a
// step is taken and delivers messages; the node says what to send. Sides
// and directions share an index: 0 is forward (sends to higher
// positions; its bounds come from g-nodes behind), 1 backward.
type CorrNode struct {
	// State is where the node is; Tau is when it delivered (or was reached
	// by the gossip phase, for a g-node still correcting) and Exit when it
	// was done.
	State     CorrState
	Tau, Exit int32

	stop  [2]bool  // no more sends in that direction (for now)
	final [2]bool  // FCG: final round started in that direction
	nk    [2]uint8 // FCG: known g-nodes on each side
	nc    uint8    // FCG c-node: known distinct g-nodes
	off   [2]int32 // next distance to send to, per direction
	lim   [2]int32 // CCG: distance of the closest g-node, per direction
	last  int32    // its last send
	step  int32    // correction steps taken
	dl    int32    // FCG c-node: SOS deadline
	// FCG lists, closest first: k[0] the g-nodes behind (learned from
	// forward messages), k[1] those ahead (from backward messages).
	k [2][MaxF + 1]uint32
}

// Reset makes nd a node not reached yet.
func (nd *CorrNode) Reset() {
	*nd = CorrNode{Tau: Never, Exit: Never, lim: [2]int32{Never, Never}}
}

// Reached makes nd a g-node reached by the gossip phase at step tau.
func (nd *CorrNode) Reached(tau int32) { nd.State, nd.Tau = StateG, tau }

// BeginCorrection prepares a g-node for the correction phase.
func (nd *CorrNode) BeginCorrection() { nd.off = [2]int32{1, 1} }

// WaitUntil returns the step at which an FCG c-node waiting for f+1
// g-nodes gives up (SOS), 0 for a node in any other state.
func (nd *CorrNode) WaitUntil() int32 {
	if nd.State != StateC {
		return 0
	}
	return nd.dl
}

// Settled reports whether a message of kind k can no longer change nd: an
// FCG g-node whose final round in that direction has started.
func (nd *CorrNode) Settled(k CorrKind) bool { return k <= CorrBwd && nd.final[k] }

// Dist returns the distance from x to y on side 0 (behind x, lower
// positions mod n) or side 1 (ahead, higher positions).
func Dist(x, y uint32, side CorrKind, n int32) int32 {
	d := int32(y) - int32(x)
	if side == 0 {
		d = -d
	}
	if d < 0 {
		d += n
	}
	return d
}

// target returns the position at distance off from x in direction dir.
func target(x uint32, dir CorrKind, off, n int32) uint32 {
	if dir == 0 {
		return uint32((int32(x) + off) % n)
	}
	return uint32(((int32(x)-off)%n + n) % n)
}

// merge adds y to x's sorted list of the closest f+1 g-nodes on side.
func merge(list *[MaxF + 1]uint32, cnt *uint8, x, y uint32, side CorrKind, n int32, f int) {
	if y == x {
		return
	}
	dy := Dist(x, y, side, n)
	k := int(*cnt)
	i := 0
	for ; i < k; i++ {
		if list[i] == y {
			return
		}
		if Dist(x, list[i], side, n) > dy {
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

// Receive handles m, delivered to node self at step tau. joined reports
// that a node not reached before became active (an FCG c-node or SOS): the
// driver must step it from the next step on; sos that it entered SOS mode.
// An OCG or CCG c-node delivers at once (State StateDone).
func (nd *CorrNode) Receive(p *CorrParams, self uint32, m *CorrMsg, tau int32) (joined, sos bool) {
	if nd.State == StateDone || nd.State == StateDead || nd.State == StateSOS {
		return false, false
	}
	if m.Kind == CorrSOS {
		return nd.enterSOS(), true
	}
	side := m.Kind // a forward message comes from behind: side 0
	switch p.Alg {
	case OCG, CCG:
		if nd.State == StateNone { // a c-node: delivers, sends nothing
			nd.State, nd.Tau, nd.Exit = StateDone, tau, tau
			return false, false
		}
		if p.Alg == CCG {
			// The first message from a side bounds the sends toward it:
			// a forward message bounds the backward sends.
			d := Dist(self, m.From, side, p.N)
			dir := 1 - side
			nd.lim[dir] = min(nd.lim[dir], d)
		}
	case FCG:
		switch nd.State {
		case StateNone:
			nd.State, nd.dl = StateC, tau+p.Timeout
			joined = true
			fallthrough
		case StateC:
			// A c-node collects distinct g-nodes, whichever side.
			for i := -1; i < int(m.N); i++ {
				y := m.From
				if i >= 0 {
					y = m.List[i]
				}
				known := y == self
				for _, z := range nd.k[0][:nd.nc] {
					known = known || z == y
				}
				if !known && int(nd.nc) <= p.F {
					nd.k[0][nd.nc] = y
					nd.nc++
				}
			}
			if int(nd.nc) > p.F {
				nd.State, nd.Tau, nd.Exit = StateDone, tau, tau
			}
		case StateG:
			if nd.final[side] {
				return false, false // the list that final round carries is settled
			}
			merge(&nd.k[side], &nd.nk[side], self, m.From, side, p.N, p.F)
			for _, y := range m.List[:m.N] {
				merge(&nd.k[side], &nd.nk[side], self, y, side, p.N, p.F)
			}
		}
	}
	return joined, false
}

// enterSOS starts SOS mode: the node will send to every other node. It
// reports whether the node was not reached before (it joins the active
// ones).
func (nd *CorrNode) enterSOS() (joined bool) {
	joined = nd.State == StateNone
	nd.State = StateSOS
	nd.off[0] = 1
	return joined
}

// Step is node self's action in step s: it calls send for each message
// (at most one per step) and reports whether the node stays active and
// whether it entered SOS mode in this step.
func (nd *CorrNode) Step(p *CorrParams, self uint32, s int32, send func(to uint32, kind CorrKind, list []uint32)) (active, sos bool) {
	n := p.N
	switch nd.State {
	case StateC:
		if s >= nd.dl {
			if p.NoSOS {
				return false, false // gives up waiting: stays uncolored
			}
			nd.enterSOS()
			active, _ = nd.Step(p, self, s, send)
			return active, true
		}
		return true, false
	case StateSOS:
		send(uint32((int32(self)+nd.off[0])%n), CorrSOS, nil)
		nd.off[0]++
		if nd.off[0] >= n {
			nd.State, nd.Tau, nd.Exit = StateDone, s, s
			return false, false
		}
		return true, false
	case StateG:
	default:
		return false, false
	}
	j := nd.step + 1
	nd.step++
	dir := CorrKind((j - 1) % 2)
	switch p.Alg {
	case OCG:
		if j > int32(p.C) {
			nd.State, nd.Exit = StateDone, max(nd.Tau, s-1)
			return false, false
		}
		send(target(self, dir, (j+1)/2, n), dir, nil)
		if j == int32(p.C) {
			nd.State, nd.Exit = StateDone, s
			return false, false
		}
		return true, false
	case CCG:
		off := (j + 1) / 2
		if off > nd.lim[dir] || off >= n {
			nd.stop[dir] = true
		}
		if !nd.stop[dir] {
			send(target(self, dir, off, n), dir, nil)
			nd.last = s
		}
		if nd.stop[0] && nd.stop[1] {
			nd.State, nd.Exit = StateDone, max(nd.Tau, nd.last, s-1)
			return false, false
		}
		return true, false
	case FCG:
	default: // GOS has no correction
		nd.State, nd.Exit = StateDone, max(nd.Tau, s-1)
		return false, false
	}
	f := p.F
	if !nd.final[dir] && int(nd.nk[dir]) > f {
		nd.final[dir], nd.off[dir], nd.stop[dir] = true, 1, false
	}
	if o := 1 - dir; int(nd.nk[o]) > f && nd.off[dir] > Dist(self, nd.k[o][f], o, n) {
		nd.stop[dir] = true
	}
	if !nd.stop[dir] {
		if nd.off[dir] >= n {
			if !p.NoSOS {
				nd.enterSOS()
				return true, true
			}
			nd.stop[dir], nd.final[dir] = true, true
		} else {
			send(target(self, dir, nd.off[dir], n), dir, nd.k[dir][:nd.nk[dir]])
			nd.off[dir]++
			nd.last = s
		}
	}
	if nd.final[0] && nd.final[1] && nd.stop[0] && nd.stop[1] {
		e := max(nd.Tau, nd.last, s-1)
		nd.State, nd.Tau, nd.Exit = StateDone, e, e
		return false, false
	}
	return true, false
}
