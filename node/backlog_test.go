package node_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// stuckPath wraps an in-memory endpoint to play a starved receive path:
// while stuck is set, rank 0's heartbeats to rank 1 do not reach rank 1's
// slot, and rank 1's transport reports them waiting (transport.Backlogged),
// as TCP does when its reader goroutine gets no CPU.
type stuckPath struct {
	transport.Transport
	self  ranks.Rank
	stuck *atomic.Bool
}

func (s *stuckPath) SendHeartbeat(to ranks.Rank, seq uint64) error {
	if s.self == 0 && to == 1 && s.stuck.Load() {
		return nil
	}
	return s.Transport.SendHeartbeat(to, seq)
}

func (s *stuckPath) HeartbeatBacklog(from ranks.Rank) bool {
	return s.self == 1 && from == 0 && s.stuck.Load()
}

// backlogRun runs 4 ranks, keeps rank 1's receive path stuck for 6δ and
// returns the nodes once it is released (or 0 was suspected).
func backlogRun(t *testing.T, cfg node.Config) []*node.Node {
	t.Helper()
	var stuck atomic.Bool
	nodes := startWrapped(t, 4, cfg, func(r ranks.Rank, tr transport.Transport) transport.Transport {
		return &stuckPath{Transport: tr, self: r, stuck: &stuck}
	}).nodes
	time.Sleep(cfg.StartGrace / 2) // every ring link up
	stuck.Store(true)
	deadline := time.Now().Add(6 * cfg.SuspectTimeout)
	for time.Now().Before(deadline) {
		if _, ok := nodes[1].Known(0); ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stuck.Store(false)
	time.Sleep(2 * cfg.SuspectTimeout)
	return nodes
}

var backlogCfg = node.Config{
	HeartbeatPeriod: 50 * time.Millisecond,
	SuspectTimeout:  500 * time.Millisecond,
	CheckPeriod:     50 * time.Millisecond,
	StartGrace:      time.Second,
}

// TestBacklogHoldsSuspicion: a live emitter whose heartbeats wait in its
// observer's receive path for 6δ is not suspected; the observer holds its
// checks and counts them.
func TestBacklogHoldsSuspicion(t *testing.T) {
	nodes := backlogRun(t, backlogCfg)
	for i, nd := range nodes {
		if dead := nd.Dead(); len(dead) != 0 {
			t.Fatalf("rank %d holds %v dead; every rank is alive", i, dead)
		}
	}
	if held := nodes[1].Stats().ChecksHeld; held == 0 {
		t.Fatal("rank 1 never held a check while its emitter's heartbeats waited")
	}
	if held := nodes[2].Stats().ChecksHeld; held != 0 {
		t.Fatalf("rank 2 held %d checks with nothing waiting", held)
	}
}

// TestBacklogGuardOff: the same run with the guard off suspects the live
// rank 0, which is what the guard prevents.
func TestBacklogGuardOff(t *testing.T) {
	cfg := backlogCfg
	cfg.NoBacklogGuard = true
	nodes := backlogRun(t, cfg)
	if _, ok := nodes[1].Known(0); !ok {
		t.Fatal("with the guard off, 6δ without heartbeats did not suspect rank 0")
	}
	if held := nodes[1].Stats().ChecksHeld; held != 0 {
		t.Fatalf("%d checks held with the guard off", held)
	}
}
