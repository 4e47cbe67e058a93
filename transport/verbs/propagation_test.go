package verbs

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// BenchmarkFailurePropagation is the broadcast of one failure to 8 ranks
// (issues #15 and #18): 8 nodes in this process over verbs, and the same
// over TCP in the same guest, for each propagation of node.Broadcasts.
// Each iteration starts a fresh job, closes one node (its transport closes
// like a killed process's) and reports the time from the detector's
// delivery to the last survivor's (spread_us) and the messages the
// survivors sent meanwhile (msgs).
func BenchmarkFailurePropagation(b *testing.B) {
	needDevice(b)
	for _, tr := range []string{"verbs", "tcp"} {
		for _, bc := range node.Broadcasts {
			b.Run(tr+"/"+bc, func(b *testing.B) {
				var spreads []time.Duration
				var msgs uint64
				for i := range b.N {
					s, m := propagateOnce(b, tr, bc, uint64(1000+i))
					spreads = append(spreads, s)
					msgs += m
				}
				slices.Sort(spreads)
				b.ReportMetric(float64(spreads[len(spreads)/2].Microseconds()), "spread_us")
				b.ReportMetric(float64(msgs)/float64(b.N), "msgs")
			})
		}
	}
}

// propagateOnce runs one job of 8 nodes over tr with broadcast bc, stops
// rank 3 and returns the spread and the survivors' messages.
func propagateOnce(b *testing.B, tr, bc string, job uint64) (time.Duration, uint64) {
	const n, victim = 8, 3
	cfg := node.Config{Size: n, HeartbeatPeriod: 20 * time.Millisecond, SuspectTimeout: 400 * time.Millisecond,
		StartGrace: 2 * time.Second, Broadcast: bc}
	nodes := make([]*node.Node, n)
	closeAll := func() {
		for _, nd := range nodes {
			if nd != nil {
				nd.Close()
			}
		}
	}
	defer closeAll()
	switch tr {
	case "verbs":
		copy(nodes, startNodesWith(b, openAll(b, n, job), cfg))
	default:
		trs := make([]*tcp.Transport, n)
		addrs := make([]string, n)
		for i := range n {
			c := cfg
			c.Rank = ranks.Rank(i)
			nd, err := node.Start(c, func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
				t, err := tcp.Listen(tcp.Config{Self: uint32(i), N: n, JobID: job, Key: testKey, Slots: s, Handler: h})
				trs[i] = t
				return t, err
			})
			if err != nil {
				b.Fatalf("node %d: %v", i, err)
			}
			nodes[i] = nd
			addrs[i] = trs[i].Addr()
		}
		for _, t := range trs {
			if err := t.SetPeers(addrs); err != nil {
				b.Fatal(err)
			}
		}
	}
	time.Sleep(cfg.StartGrace + 2*cfg.SuspectTimeout)
	for i, nd := range nodes {
		if d := nd.Dead(); len(d) != 0 {
			b.Fatalf("%s/%s: before the failure rank %d reports %v dead", tr, bc, i, d)
		}
	}
	var before uint64
	for i, nd := range nodes {
		if i != victim {
			before += nd.Stats().Transport.MsgsSent
		}
	}
	nodes[victim].Close()
	nodes[victim] = nil
	var first, last int64
	for i, nd := range nodes {
		if nd == nil {
			continue
		}
		waitFor(b, 20*time.Second, fmt.Sprintf("%s/%s: rank %d reports rank %d", tr, bc, i, victim), func() bool {
			_, ok := nd.Known(victim)
			return ok
		})
		ev, _ := nd.Known(victim)
		// More than one survivor may have detected it (each names
		// itself): the spread starts at the earliest.
		if ranks.Rank(i) == ev.Detector && (first == 0 || ev.DeliveredMono < first) {
			first = ev.DeliveredMono
		}
		last = max(last, ev.DeliveredMono)
	}
	time.Sleep(2 * cfg.SuspectTimeout) // the correction's and the repair's last messages
	var after uint64
	for i, nd := range nodes {
		if nd == nil {
			continue
		}
		if d := nd.Dead(); !slices.Equal(d, []ranks.Rank{victim}) {
			b.Fatalf("%s/%s: rank %d reports %v, want [%d]", tr, bc, i, d, victim)
		}
		after += nd.Stats().Transport.MsgsSent
	}
	if first == 0 {
		b.Fatalf("%s/%s: the detector's own delivery is missing", tr, bc)
	}
	return time.Duration(last - first), after - before
}
