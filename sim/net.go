package sim

import (
	"fmt"
	"math/rand/v2"
)

// Network is a communication model. It hands each run fresh port state.
type Network interface {
	// String names the model and its parameters.
	String() string
	// NewPorts returns the state of the ports of n nodes, drawing any
	// randomness from r.
	NewPorts(n int, r *rand.Rand) Ports
	// Bound is an upper bound on the transfer time of one message when the
	// ports involved are free (the papers' t): the one-port model's t, and
	// 2o+L for LogP.
	Bound() int64
}

// Ports is the per-run state of a Network: when each node's ports are free.
type Ports interface {
	// Transfer books the ports for one message that from asks to send to
	// at time now. It returns when the sender is done with it (sent: a
	// sender that dies before then does not send it) and when it is
	// delivered (fully received). toAlive false means the destination is
	// dead: the sender still spends its time, but no receive port is
	// booked.
	Transfer(now int64, from, to uint32, toAlive bool) (sent, delivered int64)
}

// OnePort is the one-port model of seed 000 (§3.1.2, after Bhat et al.):
// a message takes a time uniform in (0, T] (exactly T when Fixed); a node
// sends at most one message and receives at most one message at any time
// (SinglePort: takes part in at most one transfer, sending or receiving), so
// two messages sent by the same node, or received by it, are serialized.
//
// A transfer holds the sender's send port and the receiver's receive port
// during the same interval. Messages are booked in the order they are sent,
// each in the earliest interval, from the time it is sent on, in which both
// ports are free: a node whose next destination is busy still uses its port
// for other messages meanwhile. (Booking each message after the later of
// the two ports' last bookings instead would chain every node's bookings to
// its partners' and delay messages by hundreds of transfer times in a
// flood; booking the receive port after the send, in send order, would let
// a message sent later but booked first hold up one that arrives earlier.)
type OnePort struct {
	// T is the bound on one message's transfer time, in nanoseconds.
	T int64
	// Fixed makes every transfer take exactly T (the telephone model, in
	// which a binomial tree broadcast takes ⌈log2 N⌉ rounds).
	Fixed bool
	// SinglePort makes sending and receiving share one port per node.
	SinglePort bool
}

// String implements Network.
func (m OnePort) String() string {
	s := fmt.Sprintf("one-port(t=%dns", m.T)
	if m.Fixed {
		s += ", fixed"
	}
	if m.SinglePort {
		s += ", single port"
	}
	return s + ")"
}

// Bound implements Network.
func (m OnePort) Bound() int64 { return m.T }

// NewPorts implements Network.
func (m OnePort) NewPorts(n int, r *rand.Rand) Ports {
	if m.T <= 0 {
		panic("sim: OnePort.T must be > 0")
	}
	p := &onePorts{m: m, send: make([]calendar, n), r: r}
	if m.SinglePort {
		p.recv = p.send
	} else {
		p.recv = make([]calendar, n)
	}
	return p
}

type onePorts struct {
	m          OnePort
	send, recv []calendar
	r          *rand.Rand
}

func (p *onePorts) Transfer(now int64, from, to uint32, toAlive bool) (int64, int64) {
	d := p.m.T
	if !p.m.Fixed {
		d = uniformDelay(p.r, p.m.T)
	}
	a := &p.send[from]
	a.prune(now)
	if !toAlive {
		s, i := a.fit(now, d)
		a.insert(i, s, s+d)
		return s + d, s + d
	}
	b := &p.recv[to]
	b.prune(now)
	s := now
	for {
		s1, _ := a.fit(s, d)
		s2, _ := b.fit(s1, d)
		if s2 == s1 {
			s = s1
			break
		}
		s = s2
	}
	_, i := a.fit(s, d)
	a.insert(i, s, s+d)
	if b != a {
		_, j := b.fit(s, d)
		b.insert(j, s, s+d)
	}
	return s + d, s + d
}

// calendar is one port's booked transfers: disjoint intervals sorted by
// time, touching ones merged, the past pruned. Up to len(in) intervals live
// inline, so that a port is two cache lines; more spill to ov.
type calendar struct {
	n  int32 // intervals in use, in in[:n] or ov[:n]
	_  int32
	in [6]interval
	ov []interval
}

type interval struct{ s, e int64 }

func (c *calendar) view() []interval {
	if c.ov != nil {
		return c.ov[:c.n]
	}
	return c.in[:c.n]
}

// prune drops the intervals over by now.
func (c *calendar) prune(now int64) {
	iv := c.view()
	k := 0
	for k < len(iv) && iv[k].e <= now {
		k++
	}
	if k == 0 {
		return
	}
	m := copy(iv, iv[k:])
	c.n = int32(m)
	if c.ov != nil && m <= len(c.in) {
		copy(c.in[:], c.ov[:m])
		c.ov = nil
	}
}

// fit returns the earliest start s ≥ t of a free interval of length d and
// the index before which it goes.
func (c *calendar) fit(t, d int64) (int64, int) {
	iv := c.view()
	s := t
	for i := range iv {
		if iv[i].e <= s {
			continue
		}
		if iv[i].s >= s+d {
			return s, i
		}
		s = iv[i].e
	}
	return s, len(iv)
}

// insert books [s, e) before index i, merging it with touching neighbours.
func (c *calendar) insert(i int, s, e int64) {
	iv := c.view()
	prev := i > 0 && iv[i-1].e == s
	next := i < len(iv) && iv[i].s == e
	switch {
	case prev && next:
		iv[i-1].e = iv[i].e
		copy(iv[i:], iv[i+1:])
		c.n--
		return
	case prev:
		iv[i-1].e = e
		return
	case next:
		iv[i].s = s
		return
	}
	if c.ov == nil && int(c.n) == len(c.in) {
		c.ov = make([]interval, c.n, 2*len(c.in))
		copy(c.ov, c.in[:])
	}
	if c.ov != nil {
		c.ov = append(c.ov[:c.n], interval{})
		iv = c.ov
	} else {
		iv = c.in[:c.n+1]
	}
	copy(iv[i+1:], iv[i:])
	iv[i] = interval{s, e}
	c.n++
}

// LogP is the model of seed 002 (§II): sending or receiving a message costs
// the node O, a message spends L in the network, and successive sends of a
// node start at least max(O, G) apart. Sends and receives proceed at the same
// time. With RecvContention a node receives one message at a time (each
// costs O on its receive port); without it, as in seed 002's analysis,
// simultaneous arrivals do not delay each other.
type LogP struct {
	L, O, G        int64
	RecvContention bool
}

// String implements Network.
func (m LogP) String() string {
	return fmt.Sprintf("LogP(L=%dns, o=%dns, g=%dns, recv-contention=%v)", m.L, m.O, m.G, m.RecvContention)
}

// Bound implements Network.
func (m LogP) Bound() int64 { return 2*m.O + m.L }

// gap is the time between two send starts of one node.
func (m LogP) gap() int64 { return max(m.O, m.G) }

// NewPorts implements Network.
func (m LogP) NewPorts(n int, _ *rand.Rand) Ports {
	p := &logpPorts{m: m, sendFree: make([]int64, n)}
	if m.RecvContention {
		p.recvFree = make([]int64, n)
	}
	return p
}

type logpPorts struct {
	m        LogP
	sendFree []int64
	recvFree []int64
}

func (p *logpPorts) Transfer(now int64, from, to uint32, toAlive bool) (int64, int64) {
	start := max(now, p.sendFree[from])
	p.sendFree[from] = start + p.m.gap()
	sent := start + p.m.O
	arrive := sent + p.m.L
	if p.recvFree == nil || !toAlive {
		return sent, arrive + p.m.O
	}
	rs := max(arrive, p.recvFree[to])
	p.recvFree[to] = rs + p.m.O
	return sent, rs + p.m.O
}

// recvBusy is implemented by the ports whose receives occupy the receiver
// (the node's loop handles them one at a time).
type recvBusy interface {
	// recvBusy returns until when node q is busy receiving the messages
	// booked for it.
	recvBusy(q uint32) int64
}

func (p *logpPorts) recvBusy(q uint32) int64 {
	if p.recvFree == nil {
		return 0
	}
	return p.recvFree[q]
}
