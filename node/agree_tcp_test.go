package node_test

import (
	"slices"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	"github.com/vigil-hpc/vigil/transport/tcp"
)

// startTCPCluster starts n nodes over TCP on loopback. The cluster's
// network is not used: kill closes a node (its sockets close, as a crash
// would close them). With a wrap, rank i's configuration may be adjusted
// and its transport wrapped (nil: as is).
func startTCPCluster(t *testing.T, n int, cfg node.Config, wrap ...tcpWrap) *cluster {
	t.Helper()
	c := &cluster{t: t, killed: map[ranks.Rank]bool{}}
	trs := make([]*tcp.Transport, n)
	addrs := make([]string, n)
	for i := range n {
		cfg := cfg
		cfg.Rank, cfg.Size = ranks.Rank(i), n
		var outer func(*tcp.Transport) transport.Transport
		for _, w := range wrap {
			outer = w(i, &cfg)
		}
		nd, err := node.Start(cfg, func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
			tr, err := tcp.Listen(tcp.Config{Self: uint32(i), N: n, JobID: tcpClusterJob, Key: tcpClusterKey,
				Slots: s, Handler: h})
			trs[i] = tr
			if err != nil || outer == nil {
				return tr, err
			}
			return outer(tr), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = trs[i].Addr()
		c.nodes = append(c.nodes, nd)
	}
	for _, tr := range trs {
		if err := tr.SetPeers(addrs); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.Close()
		}
	})
	return c
}

// tcpWrap adjusts rank i of a TCP cluster before it starts; it returns a
// wrapper for its transport, or nil.
type tcpWrap func(i int, cfg *node.Config) func(*tcp.Transport) transport.Transport

// The job of startTCPCluster's nodes: its own per test process, so that
// the shared-memory regions of concurrent runs never meet.
var (
	tcpClusterJob = uint64(time.Now().UnixNano())
	tcpClusterKey = []byte("vigil-agree-test-key")
)

func TestAgreeOverTCP(t *testing.T) {
	const n, count = 8, 40
	c := startTCPCluster(t, n, agreeCfg)
	onDecide := func(r ranks.Rank, k int) {
		if r == n-1 && k == 15 {
			c.killed[0] = true // the root
			go c.nodes[0].Close()
		}
	}
	res := runLoop(t, c, count, 30*time.Second, onDecide)
	flagged := checkLoop(t, c, res, count)
	if d := lastDecision(c, res).Dead; !slices.Contains(d, 0) || len(d) != len(c.killed) {
		t.Fatalf("last dead set %v, want the root and any rank evicted under load", d)
	}
	t.Logf("%d agreements over TCP, root killed, %d flagged", count, flagged)
}
