package daemon_test

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap/local"
	"github.com/vigil-hpc/vigil/daemon"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
)

// Two nodes' daemons on loopback, each starting one process of the job
// (sleep, standing for an unmodified application), their addresses
// exchanged through the local launcher's bootstrap. The process on node 1
// is killed: its daemon reports it, and daemon 0 receives the event.
func ExampleStart() {
	srv, _ := local.NewServer(2) // the launcher's side; mpirun's PMIx in a real job
	defer srv.Close()
	ds := make([]*daemon.Daemon, 2)
	started := make(chan error, 2)
	for i := range ds {
		bs := local.NewClient(srv.Identity(uint32(i)))
		go func() {
			d, err := daemon.Start(daemon.Config{
				Node: ranks.Rank(i), Layout: daemon.Layout{Nodes: 2, PPN: 1},
				Exchange: func(addr string) ([]string, error) { return bs.Exchange(context.Background(), addr) },
				JobID:    bs.JobID(), Key: bs.Key(),
				Config: node.Config{HeartbeatPeriod: 50 * time.Millisecond, SuspectTimeout: 500 * time.Millisecond},
				Spawn:  []string{"sleep", "600"}, // rank i, with VIGIL_RANK=i
			})
			ds[i] = d
			started <- err
		}()
	}
	for range ds {
		if err := <-started; err != nil {
			fmt.Println(err)
			return
		}
	}
	defer ds[0].Close()
	defer ds[1].Close()

	syscall.Kill(ds[1].Locals()[1], syscall.SIGKILL)
	for {
		select {
		case ev := <-ds[0].Events():
			fmt.Printf("%s: rank %d on node %d, %s (seen by node %d)\n", ev.Kind, ev.Rank, ev.Node, ev.Cause, ev.Detector)
			return
		case <-time.After(10 * time.Second):
			fmt.Println("no event")
			return
		}
	}
	// Output: proc: rank 1 on node 1, crashed (seen by node 1)
}
