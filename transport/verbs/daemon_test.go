package verbs

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/daemon"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// Node-level mode over verbs: three daemons in one process, each spawning
// two `sleep` processes, their ring heartbeats RDMA-written and their
// messages over UD. A killed local process is reported crashed by every
// daemon; a closed daemon (a node's death) is reported with the two ranks
// it hosted; nothing else is reported.
func TestDaemonsOverVerbs(t *testing.T) {
	const n, ppn = 3, 2
	ts := openAll(t, n, 77)
	addrs := addrsOf(ts)
	ds := make([]*daemon.Daemon, n)
	evs := make([]<-chan daemon.Event, n)
	for i := range ts {
		tr := ts[i]
		d, err := daemon.Start(daemon.Config{Node: ranks.Rank(i), Layout: daemon.Layout{Nodes: n, PPN: ppn},
			Config: node.Config{HeartbeatPeriod: 20 * time.Millisecond, SuspectTimeout: time.Second, StartGrace: 3 * time.Second,
				Slots: tr.Slots(), Logger: logger(t)},
			Spawn: []string{"sleep", "600"},
			Transport: func(_ *transport.Slots, h transport.Handler) (transport.Transport, error) {
				return tr, tr.Start(addrs, h)
			}})
		if err != nil {
			t.Fatalf("daemon %d: %v", i, err)
		}
		ds[i], evs[i] = d, d.Events()
		t.Cleanup(func() { d.Close() })
	}
	time.Sleep(4 * time.Second) // past the grace: heartbeats flow over RDMA
	var writes uint64
	for _, tr := range ts {
		writes += tr.VerbsStats().RCWrites
	}
	if writes == 0 {
		t.Fatal("no heartbeat went over RDMA")
	}
	expect := func(who int, want ...string) {
		t.Helper()
		left := map[string]bool{}
		for _, w := range want {
			left[w] = true
		}
		deadline := time.After(15 * time.Second)
		for len(left) > 0 {
			select {
			case ev := <-evs[who]:
				k := fmt.Sprintf("node %d", ev.Node)
				if ev.Kind == daemon.KindProc {
					k = fmt.Sprintf("proc %d %s", ev.Rank, ev.Cause)
				}
				if !left[k] {
					t.Fatalf("daemon %d: unexpected event %s (%+v)", who, k, ev)
				}
				delete(left, k)
			case <-deadline:
				t.Fatalf("daemon %d: still waiting for %v", who, left)
			}
		}
	}
	if err := syscall.Kill(ds[1].Locals()[3], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		expect(i, "proc 3 crashed")
	}
	ds[2].Close() // its children die with it: the node is gone
	for i := range 2 {
		expect(i, "node 2", "proc 4 node_down", "proc 5 node_down")
	}
	for i := range 2 {
		select {
		case ev := <-evs[i]:
			t.Errorf("daemon %d: extra event %+v", i, ev)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
