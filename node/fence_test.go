package node_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/mem"
)

// startLate starts a job of n ranks on the in-memory transport, rank late
// lateBy after the others, each through StartFenced with fence (nil:
// Start). It returns the nodes once every Start returned.
func startLate(t *testing.T, n int, late ranks.Rank, lateBy time.Duration, cfg node.Config, fence func() error) ([]*node.Node, *mem.Network) {
	t.Helper()
	net := mem.NewNetwork(n)
	nodes := make([]*node.Node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if ranks.Rank(i) == late {
				time.Sleep(lateBy)
			}
			cfg := cfg
			cfg.Rank, cfg.Size = ranks.Rank(i), n
			nodes[i], errs[i] = node.StartFenced(cfg, func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
				return net.Endpoint(ranks.Rank(i), s, h), nil
			}, fence)
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, nd := range nodes {
			if nd != nil {
				nd.Close()
			}
		}
		net.Close()
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
	}
	return nodes, net
}

// barrier is a start fence of n ranks: each call returns once n calls
// were made.
func barrier(n int) func() error {
	var mu sync.Mutex
	in := 0
	all := make(chan struct{})
	return func() error {
		mu.Lock()
		in++
		if in == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("barrier: the other ranks did not come in 10 s")
		}
	}
}

// A rank that comes up four grace periods after the others: with the
// start fence nobody reports it, since the grace counts from the fence;
// without it (Start) its observer's grace runs out while it is still
// starting, and it is reported.
func TestStartFenceHoldsTheGrace(t *testing.T) {
	cfg := node.Config{HeartbeatPeriod: 10 * time.Millisecond, SuspectTimeout: 50 * time.Millisecond,
		StartGrace: 100 * time.Millisecond}
	const n, late, lateBy = 3, ranks.Rank(2), 400 * time.Millisecond
	observer := ranks.Rank(0) // emitter_0 = 2: rank 0 observes rank 2

	t.Run("fenced", func(t *testing.T) {
		nodes, _ := startLate(t, n, late, lateBy, cfg, barrier(n))
		time.Sleep(3 * (cfg.StartGrace + cfg.SuspectTimeout))
		for i, nd := range nodes {
			if d := nd.Dead(); len(d) != 0 {
				t.Fatalf("rank %d holds %v dead after a fenced start", i, d)
			}
		}
	})
	t.Run("unfenced", func(t *testing.T) {
		nodes, _ := startLate(t, n, late, lateBy, cfg, nil)
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, ok := nodes[observer].Known(late); ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("without the fence, rank %d did not report rank %d, started %v late", observer, late, lateBy)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// A start fence that fails fails StartFenced, which releases what it
// started.
func TestStartFenceFailure(t *testing.T) {
	net := mem.NewNetwork(2)
	defer net.Close()
	boom := errors.New("fence broken")
	nd, err := node.StartFenced(node.Config{Rank: 0, Size: 2, HeartbeatPeriod: 10 * time.Millisecond, SuspectTimeout: 50 * time.Millisecond},
		func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
			return net.Endpoint(0, s, h), nil
		}, func() error { return boom })
	if nd != nil || !errors.Is(err, boom) {
		t.Fatalf("StartFenced = %v, %v; want nil and an error wrapping %q", nd, err, boom)
	}
}
