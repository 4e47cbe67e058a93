package node

import (
	"context"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/mem"
)

// A Leave whose ctx ends before the loop takes it (the loop held up, as a
// starved agent's is while a whole job stops) still sends the LEAVE once
// the loop gets to it: the others learn a departure, not a crash.
func TestLeaveAfterItsContextEnded(t *testing.T) {
	const n = 4
	net := mem.NewNetwork(n)
	defer net.Close()
	nodes := make([]*Node, n)
	for i := range n {
		nd, err := Start(Config{Rank: ranks.Rank(i), Size: n, HeartbeatPeriod: 10 * time.Millisecond,
			SuspectTimeout: 200 * time.Millisecond, StartGrace: 500 * time.Millisecond},
			func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
				return net.Endpoint(ranks.Rank(i), s, h), nil
			})
		if err != nil {
			t.Fatal(err)
		}
		defer nd.Close()
		nodes[i] = nd
	}
	time.Sleep(100 * time.Millisecond)
	held, release := make(chan struct{}), make(chan struct{})
	go nodes[2].do(context.Background(), func() { close(held); <-release })
	<-held
	go func() { time.Sleep(100 * time.Millisecond); close(release) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := nodes[2].Leave(ctx, 0); err != nil {
		t.Fatalf("Leave with its loop held past ctx: %v", err)
	}
	nodes[2].Close()
	net.Kill(2)
	deadline := time.Now().Add(10 * time.Second)
	for _, i := range []int{0, 1, 3} {
		for {
			if ev, ok := nodes[i].Known(2); ok {
				if !ev.Left {
					t.Fatalf("rank %d learned rank 2 gone as a crash: %+v", i, ev)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rank %d did not learn rank 2's departure in 10 s", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
