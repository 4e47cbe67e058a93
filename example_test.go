package vigil_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/vigil-hpc/vigil"
)

// Three ranks in one process; rank 2 stops without leaving, and rank 0
// (its observer) reports it.
func Example() {
	job, _ := vigil.NewLocalJob(3)
	defer job.Close()
	ds := make([]*vigil.Detector, 3)
	var wg sync.WaitGroup
	for r := range ds {
		wg.Go(func() {
			cfg := vigil.DefaultConfig()
			cfg.Bootstrap, cfg.StartGrace = job.Bootstrap(r), 200*time.Millisecond
			ds[r], _ = vigil.Join(context.Background(), cfg)
		})
	}
	wg.Wait()
	ds[2].Close()
	ev := <-ds[0].Events()
	fmt.Printf("rank %d is gone (crashed: %v), found by rank %d\n", ev.Rank, !ev.Left, ev.Detector)
	ds[0].Close()
	ds[1].Close()
	// Output: rank 2 is gone (crashed: true), found by rank 0
}
