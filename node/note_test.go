package node_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/mem"
)

// TestPublish: a note published by one node reaches every other node once,
// through Config.OnNote, with its source and payload; an oversized one is
// refused with an error.
func TestPublish(t *testing.T) {
	const n = 6
	net := mem.NewNetwork(n)
	got := make(chan string, 4*n)
	var nodes []*node.Node
	for i := range n {
		self := ranks.Rank(i)
		nd, err := node.Start(node.Config{Rank: self, Size: n, Broadcast: "bmg", HeartbeatPeriod: 20 * time.Millisecond,
			SuspectTimeout: 500 * time.Millisecond, StartGrace: time.Second,
			OnNote: func(note detector.Note) { got <- fmt.Sprintf("%d<-%d:%s", self, note.Source, note.Payload) }},
			func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
				return net.Endpoint(self, s, h), nil
			})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, nd)
	}
	defer func() {
		for _, nd := range nodes {
			nd.Close()
		}
		net.Close()
	}()
	if _, err := nodes[2].Publish(context.Background(), make([]byte, bcast.MaxPayload+1)); err == nil {
		t.Error("an oversized note was accepted")
	}
	if ok, err := nodes[2].Publish(context.Background(), []byte("hello")); !ok || err != nil {
		t.Fatalf("Publish: %v %v", ok, err)
	}
	want := map[string]bool{}
	for i := range n {
		if i != 2 {
			want[fmt.Sprintf("%d<-2:hello", i)] = false
		}
	}
	timeout := time.After(10 * time.Second)
	for range len(want) {
		select {
		case s := <-got:
			if seen, ok := want[s]; !ok || seen {
				t.Fatalf("unexpected or repeated note %q", s)
			}
			want[s] = true
		case <-timeout:
			t.Fatalf("notes missing: %v", want)
		}
	}
	select {
	case s := <-got:
		t.Fatalf("extra note %q", s)
	case <-time.After(100 * time.Millisecond):
	}
}

// failing is a transport that reports a failure (transport.Failer).
type failing struct {
	transport.Transport
	err error
}

func (f *failing) Failure() error { return f.err }

// TestTransportFailure: a node reports its transport's failure, and none
// for a transport that cannot fail so.
func TestTransportFailure(t *testing.T) {
	boom := errors.New("device gone")
	c := startWrapped(t, 2, node.Config{HeartbeatPeriod: 10 * time.Millisecond, SuspectTimeout: time.Second},
		func(r ranks.Rank, tr transport.Transport) transport.Transport {
			if r == 1 {
				return &failing{tr, boom}
			}
			return tr
		})
	if err := c.nodes[0].TransportFailure(); err != nil {
		t.Errorf("rank 0: %v", err)
	}
	if err := c.nodes[1].TransportFailure(); !errors.Is(err, boom) {
		t.Errorf("rank 1: %v, want %v", err, boom)
	}
}
