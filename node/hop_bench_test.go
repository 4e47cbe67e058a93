package node_test

import (
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/bcast"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/mem"
)

// BenchmarkForwardHop is one overlay hop of a failure notification through
// a node: a broadcast written by rank 0's endpoint to rank 1 (the node
// under test) until every forward of rank 1 has arrived at the other
// endpoints, on the in-memory transport (a hand-off per message, no
// system call). hop-ns is the time to the first forward, allocs/op the
// allocations of the whole hop (decode, detector, encode, transport).
func BenchmarkForwardHop(b *testing.B) {
	const n, dead = 8, 7
	net := mem.NewNetwork(n)
	defer net.Close()
	arrived := make(chan struct{}, 64)
	eps := make([]transport.Transport, n)
	for r := range ranks.Rank(n) {
		if r == 1 {
			continue
		}
		ep := net.Endpoint(r, transport.NewSlots(n), func(from ranks.Rank, p []byte) {
			if from == 1 && len(p) > 0 && wire.MsgType(p[0]) == wire.TypeBcast {
				arrived <- struct{}{}
			}
		})
		defer ep.Close()
		eps[r] = ep
	}
	nd, err := node.Start(node.Config{Rank: 1, Size: n, HeartbeatPeriod: 10 * time.Millisecond,
		SuspectTimeout: 10 * time.Second, StartGrace: time.Hour},
		func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
			return net.Endpoint(1, s, h), nil
		})
	if err != nil {
		b.Fatal(err)
	}
	defer nd.Close()
	send := func(seq uint64) {
		m := &wire.Bcast{Message: bcast.Message{ID: bcast.ID{Source: 0, Seq: seq}, Kind: bcast.Failed,
			Dead: []ranks.Rank{dead}, D: ranks.Of(dead), Detector: 0, DetectedAt: time.Now().UnixNano()}}
		if err := eps[0].Send(1, wire.AppendMessage(nil, m)); err != nil {
			b.Fatal(err)
		}
	}
	// The fan-out of rank 1 for this broadcast, counted once.
	send(1)
	fanout := 0
	for done := false; !done; {
		select {
		case <-arrived:
			fanout++
		case <-time.After(200 * time.Millisecond):
			done = true
		}
	}
	if fanout == 0 {
		b.Fatal("rank 1 forwarded nothing")
	}
	var first time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		send(uint64(i) + 2)
		<-arrived
		first += time.Since(t0)
		for range fanout - 1 {
			<-arrived
		}
	}
	b.ReportMetric(float64(first.Nanoseconds())/float64(b.N), "hop-ns")
	b.ReportMetric(float64(fanout), "fanout")
}
