package bench

import (
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// recvTimeout bounds a Recv: a lost message (the TCP transport drops on a
// full queue) must end the run with an error, not hang it.
const recvTimeout = 60 * time.Second

// TCPGroup is n ranks in this process, each with its own Vigil TCP
// transport on loopback: the Go IMB loads run over it, one goroutine per
// rank.
type TCPGroup struct {
	comms []*tcpComm
}

type tcpComm struct {
	rank, size int
	tr         *tcp.Transport
	inbox      []chan []byte // by source rank
}

// NewTCPGroup opens n transports on 127.0.0.1 and connects them.
func NewTCPGroup(n int) (*TCPGroup, error) {
	if n < 2 {
		return nil, fmt.Errorf("bench: TCP group of %d ranks, want ≥ 2", n)
	}
	key := make([]byte, 32)
	rand.Read(key)
	g := &TCPGroup{}
	addrs := make([]string, n)
	for r := range n {
		c := &tcpComm{rank: r, size: n, inbox: make([]chan []byte, n)}
		for i := range c.inbox {
			c.inbox[i] = make(chan []byte, 4*IMBMaxReps)
		}
		tr, err := tcp.Listen(tcp.Config{
			Self: uint32(r), N: n, JobID: 0xbe7c4, Key: key, Slots: hb.NewSlots(n),
			Handler:    func(from ranks.Rank, p []byte) { c.inbox[from] <- p },
			MaxPayload: IMBMaxSize + 64, QueueLen: 4 * IMBMaxReps,
		})
		if err != nil {
			g.Close()
			return nil, err
		}
		c.tr, addrs[r] = tr, tr.Addr()
		g.comms = append(g.comms, c)
	}
	for _, c := range g.comms {
		if err := c.tr.SetPeers(addrs); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

// Comm returns rank r's endpoint.
func (g *TCPGroup) Comm(r int) Comm { return g.comms[r] }

// Close closes every transport.
func (g *TCPGroup) Close() error {
	var errs []error
	for _, c := range g.comms {
		errs = append(errs, c.tr.Close())
	}
	return errors.Join(errs...)
}

// Run runs load on every rank concurrently and returns rank 0's results.
func (g *TCPGroup) Run(load Load, opt RunOptions) ([]Result, error) {
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
func (c *tcpComm) Rank() int { return c.rank }

// Size is the group's number of ranks.
func (c *tcpComm) Size() int { return c.size }

// Send queues a copy of b for rank to (to self: straight into the inbox).
func (c *tcpComm) Send(to int, b []byte) error {
	if to < 0 || to >= c.size {
		return fmt.Errorf("bench: send to rank %d of %d", to, c.size)
	}
	if to == c.rank {
		c.inbox[to] <- append([]byte(nil), b...)
		return nil
	}
	return c.tr.Send(ranks.Rank(to), b)
}

// Recv waits up to recvTimeout for the next message from rank from.
func (c *tcpComm) Recv(from int) ([]byte, error) {
	if from < 0 || from >= c.size {
		return nil, fmt.Errorf("bench: receive from rank %d of %d", from, c.size)
	}
	t := time.NewTimer(recvTimeout)
	defer t.Stop()
	select {
	case m := <-c.inbox[from]:
		return m, nil
	case <-t.C:
		return nil, fmt.Errorf("bench: rank %d: nothing from rank %d for %v (transport dropped %d messages)",
			c.rank, from, recvTimeout, c.tr.Stats().MsgsDropped)
	}
}
