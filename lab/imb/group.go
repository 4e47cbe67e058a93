package imb

import (
	"errors"
	"fmt"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// recvTimeout bounds a Recv: a lost message (the TCP transport drops on a
// full queue) must end the run with an error, not hang it.
const recvTimeout = 60 * time.Second

// Group is n ranks in this process, each with its own Vigil transport
// (TCP on loopback, verbs on an RDMA device): the Go IMB loads run over
// it, one goroutine per rank.
type Group struct {
	comms []*trComm
}

// trComm is one rank's Comm over its transport: the transport's handler
// sorts messages into one inbox per source rank.
type trComm struct {
	rank, size int
	tr         transport.Transport
	inbox      []chan []byte // by source rank
}

// OpenFunc opens rank r's transport, delivering messages to h.
type OpenFunc func(r int, h transport.Handler) (transport.Transport, error)

// ConnectFunc is called once every rank's transport is open (exchange of
// addresses, connection set-up); nil when open already connects.
type ConnectFunc func(trs []transport.Transport) error

// NewGroup opens n transports with open, then connects them.
func NewGroup(n int, open OpenFunc, connect ConnectFunc) (*Group, error) {
	if n < 2 {
		return nil, fmt.Errorf("imb: group of %d ranks, want ≥ 2", n)
	}
	g := &Group{}
	trs := make([]transport.Transport, n)
	for r := range n {
		c := &trComm{rank: r, size: n, inbox: make([]chan []byte, n)}
		for i := range c.inbox {
			c.inbox[i] = make(chan []byte, 4*IMBMaxReps)
		}
		tr, err := open(r, func(from ranks.Rank, p []byte) { c.inbox[from] <- p })
		if err != nil {
			g.Close()
			return nil, fmt.Errorf("imb: opening rank %d's transport: %w", r, err)
		}
		c.tr, trs[r] = tr, tr
		g.comms = append(g.comms, c)
	}
	if connect != nil {
		if err := connect(trs); err != nil {
			g.Close()
			return nil, fmt.Errorf("imb: connecting the group: %w", err)
		}
	}
	return g, nil
}

// Comm returns rank r's endpoint.
func (g *Group) Comm(r int) Comm { return g.comms[r] }

// Close closes every transport.
func (g *Group) Close() error {
	var errs []error
	for _, c := range g.comms {
		errs = append(errs, c.tr.Close())
	}
	return errors.Join(errs...)
}

// Run runs load on every rank concurrently and returns rank 0's results.
func (g *Group) Run(load Load, opt RunOptions) ([]Result, error) {
	res := make([][]Result, len(g.comms))
	errc := make(chan error, len(g.comms))
	for r, c := range g.comms {
		go func() {
			var err error
			res[r], err = RunIMB(c, load, opt)
			errc <- err
		}()
	}
	var errs []error
	for range g.comms {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	return res[0], errors.Join(errs...)
}

// Rank is this endpoint's rank.
func (c *trComm) Rank() int { return c.rank }

// Size is the group's number of ranks.
func (c *trComm) Size() int { return c.size }

// Send queues a copy of b for rank to (to self: straight into the inbox).
func (c *trComm) Send(to int, b []byte) error {
	if to < 0 || to >= c.size {
		return fmt.Errorf("imb: send to rank %d of %d", to, c.size)
	}
	if to == c.rank {
		c.inbox[to] <- append([]byte(nil), b...)
		return nil
	}
	return c.tr.Send(ranks.Rank(to), b)
}

// Recv waits up to recvTimeout for the next message from rank from.
func (c *trComm) Recv(from int) ([]byte, error) {
	if from < 0 || from >= c.size {
		return nil, fmt.Errorf("imb: receive from rank %d of %d", from, c.size)
	}
	t := time.NewTimer(recvTimeout)
	defer t.Stop()
	select {
	case m := <-c.inbox[from]:
		return m, nil
	case <-t.C:
		return nil, fmt.Errorf("imb: rank %d: nothing from rank %d for %v (transport dropped %d messages)",
			c.rank, from, recvTimeout, c.tr.Stats().MsgsDropped)
	}
}
