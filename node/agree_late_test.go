package node_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/era"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/mem"
)

// TestAgreeEarlyReturnAnswersLateRequests: ranks 0–2 are nodes, rank 3 is
// played by the test on a raw endpoint (in the binary tree it is the child
// of 1). The nodes return as soon as they know the decision; afterwards
// they still answer rank 3's late UP and RESULTREQUEST with the decision
// (seed 001: early return, and Part 2's rules for a decided agreement).
func TestAgreeEarlyReturnAnswersLateRequests(t *testing.T) {
	const n = 4
	net := mem.NewNetwork(n)
	defer net.Close()
	cfg := agreeCfg
	cfg.StartGrace = time.Minute // rank 3 sends no heartbeats: nobody suspects it during the test
	var nodes []*node.Node
	for i := range 3 {
		c := cfg
		c.Rank, c.Size = ranks.Rank(i), n
		nd, err := node.Start(c, func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
			return net.Endpoint(ranks.Rank(i), s, h), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer nd.Close()
		nodes = append(nodes, nd)
	}
	got := make(chan *wire.Agree, 16)
	raw := net.Endpoint(3, nil, func(from ranks.Rank, p []byte) {
		m, err := wire.DecodeMessage(p, n)
		if err != nil {
			t.Errorf("rank 3 got a bad message from %d: %v", from, err)
			return
		}
		if a, ok := m.(*wire.Agree); ok {
			got <- a
		}
	})
	defer raw.Close()
	next := func(what string) *wire.Agree {
		t.Helper()
		select {
		case a := <-got:
			return a
		case <-time.After(10 * time.Second):
			t.Fatalf("rank 3: no %s", what)
		}
		return nil
	}
	send := func(to ranks.Rank, m era.Msg) {
		t.Helper()
		if err := raw.Send(to, wire.AppendMessage(nil, &wire.Agree{Op: uint8(node.OpMax), Msg: m})); err != nil {
			t.Fatal(err)
		}
	}

	id := era.ID{Epoch: 9, Seq: 1}
	res := make([]node.Agreement, 3)
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a, err := nd.AgreeID(ctx, id, node.OpMax, era.U64(uint64(10+i)))
			if err != nil {
				t.Error(err)
			}
			res[i] = a
		}()
	}
	// Rank 3 contributes 7 to its parent, rank 1.
	send(1, era.Msg{Kind: era.Up, ID: id, Value: era.U64(7), Collect: 1})
	wg.Wait()
	want := era.U64(12)
	for i, a := range res {
		if !bytes.Equal(a.Value, want) || len(a.Dead) != 0 {
			t.Fatalf("rank %d decided %+v, want value %x", i, a, want)
		}
	}
	if d := next("DOWN from its parent"); d.Kind != era.Down || !bytes.Equal(d.Value, want) {
		t.Fatalf("rank 3 got %+v, want DOWN %x", d, want)
	}
	// Every node has returned. Late messages for the decided agreement
	// are answered with the decision: an UP to the root, a RESULTREQUEST
	// (as from a new root) to rank 2.
	send(0, era.Msg{Kind: era.Up, ID: id, Value: era.U64(99), Collect: 1})
	if d := next("answer to a late UP"); d.Kind != era.Down || !bytes.Equal(d.Value, want) || d.ID != id {
		t.Fatalf("late UP answered with %+v", d)
	}
	send(2, era.Msg{Kind: era.ResultRequest, ID: id})
	if d := next("answer to a late RESULTREQUEST"); d.Kind != era.Down || !bytes.Equal(d.Value, want) || d.ID != id {
		t.Fatalf("late RESULTREQUEST answered with %+v", d)
	}
	// A RESULTREQUEST for an agreement rank 2 has contributed to but that
	// is not decided (ranks 0, 1 and 3 have not started it) is answered
	// with rank 2's contribution (Part 2: the requester may be a new root
	// gathering again).
	id2 := era.ID{Epoch: 9, Seq: 2}
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := nodes[2].AgreeID(ctx, id2, node.OpMax, era.U64(5))
		errc <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		st, err := nodes[2].AgreeStats()
		if err != nil {
			t.Fatal(err)
		}
		if st.Started == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rank 2 did not start the second agreement")
		}
	}
	send(2, era.Msg{Kind: era.ResultRequest, ID: id2})
	if u := next("UP answering the RESULTREQUEST"); u.Kind != era.Up || !bytes.Equal(u.Value, era.U64(5)) || u.ID != id2 {
		t.Fatalf("RESULTREQUEST for an open agreement answered with %+v", u)
	}
	if err := <-errc; err == nil {
		t.Fatal("agreement decided without ranks 0, 1 and 3")
	}
}
