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
// would close them).
func startTCPCluster(t *testing.T, n int, cfg node.Config) *cluster {
	t.Helper()
	c := &cluster{t: t, killed: map[ranks.Rank]bool{}}
	trs := make([]*tcp.Transport, n)
	addrs := make([]string, n)
	for i := range n {
		cfg := cfg
		cfg.Rank, cfg.Size = ranks.Rank(i), n
		nd, err := node.Start(cfg, func(s *transport.Slots, h transport.Handler) (transport.Transport, error) {
			tr, err := tcp.Listen(tcp.Config{Self: uint32(i), N: n, JobID: 42, Key: []byte("vigil-agree-test-key"),
				Slots: s, Handler: h})
			trs[i] = tr
			return tr, err
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
