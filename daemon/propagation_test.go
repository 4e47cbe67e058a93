package daemon

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/detector"
	"github.com/vigil-hpc/vigil/lab/testnet"
	"github.com/vigil-hpc/vigil/node"
)

// TestDaemonsCorrectedPropagation: five daemons whose detector propagates
// by the fully corrected gossip (fcg) or the corrected tree (ctree), each
// hosting two spawned processes. A SIGKILLed process's report reaches
// every daemon, and a daemon's death (with its processes) every other
// daemon, each exactly once and nothing else.
func TestDaemonsCorrectedPropagation(t *testing.T) {
	for _, b := range []string{"fcg", "ctree"} {
		t.Run(b, func(t *testing.T) {
			const n, ppn = 5, 2
			ds, _ := cluster(t, n, ppn, func(c *Config) {
				c.Broadcast, c.Gossip = b, node.GossipConfig{Step: 200 * time.Microsecond, F: 2}
			})
			var subs []<-chan Event
			for _, d := range ds {
				subs = append(subs, d.Events())
			}
			time.Sleep(500 * time.Millisecond)
			if err := syscall.Kill(pidOf(t, ds[1], 3), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			for i, c := range subs {
				expect(t, fmt.Sprintf("daemon %d", i), c, want("proc 3 crashed"), 10*time.Second)
			}
			ds[3].Close() // kills its spawned processes: the node is gone
			for i, c := range subs {
				if i != 3 {
					expect(t, fmt.Sprintf("daemon %d", i), c, want("node 3", "proc 6 node_down", "proc 7 node_down"), 10*time.Second)
				}
			}
			// Exactly: no duplicate and no other report afterwards.
			time.Sleep(time.Second)
			for i, c := range subs {
				if i == 3 {
					continue
				}
				select {
				case ev := <-c:
					t.Errorf("daemon %d: extra event %s (%+v)", i, key(ev), ev)
				default:
				}
			}
		})
	}
}

// TestConfigPropagation: Start refuses an unknown Broadcast or a bad
// Gossip value, naming the field, before opening anything; the embedded
// node.Config takes Rank and Size from Node and Layout, and refuses OnNote.
func TestConfigPropagation(t *testing.T) {
	base := Config{Layout: Layout{Nodes: 1, PPN: 1}, Peers: testnet.FreeAddrs(t, 1), JobID: 7,
		Key: []byte("0123456789abcdef0123456789abcdef")}
	for _, c := range []struct {
		broadcast string
		gossip    node.GossipConfig
		want      string
	}{
		{"flood", node.GossipConfig{}, `Config.Broadcast = "flood"`},
		{"fcg", node.GossipConfig{F: 4}, "Config.Gossip.F = 4: want 1 to 3"},
		{"ocg", node.GossipConfig{Step: -time.Microsecond}, "Config.Gossip.Step = -1µs: want > 0"},
	} {
		cfg := base
		cfg.Broadcast, cfg.Gossip = c.broadcast, c.gossip
		if _, err := Start(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: Start gave %v, want an error with %q", c.broadcast, c.gossip, err, c.want)
		}
	}
	if got := base.withDefaults().Broadcast; got != DefaultBroadcast || DefaultBroadcast != "bmg" {
		t.Errorf("default Broadcast %q, want bmg", got)
	}
	// The embedded node.Config: Rank and Size are the daemon's, OnNote is
	// the daemon's own.
	two := base
	two.Node, two.Layout.Nodes, two.Peers = 1, 2, append(base.Peers, base.Peers[0])
	if got := two.withDefaults().Config; got.Rank != 1 || got.Size != 2 {
		t.Errorf("Rank %d, Size %d, want 1 of 2 (Node, Layout.Nodes)", got.Rank, got.Size)
	}
	noted := base
	noted.OnNote = func(detector.Note) {}
	if err := noted.Validate(); err == nil || !strings.Contains(err.Error(), "OnNote") {
		t.Errorf("Validate with OnNote set: %v, want an error naming OnNote", err)
	}
}
