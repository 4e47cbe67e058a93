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

// Join in a program started by a launcher (`vigil run -n 4 -- ./prog`, or
// mpirun with a binary built with -tags pmix): the bootstrap comes from
// the environment. Here the two ranks are in one process, so each is
// given its bootstrap explicitly.
func ExampleJoin() {
	job, err := vigil.NewLocalJob(2) // a launcher's part: leave cfg.Bootstrap nil under one
	if err != nil {
		fmt.Println(err)
		return
	}
	defer job.Close()
	ds := make([]*vigil.Detector, 2)
	var wg sync.WaitGroup
	for r := range ds {
		wg.Go(func() {
			cfg := vigil.DefaultConfig() // h = 10 ms, δ = 5×h
			cfg.Bootstrap = job.Bootstrap(r)
			d, err := vigil.Join(context.Background(), cfg) // every rank calls it
			if err != nil {
				fmt.Println(err)
				return
			}
			ds[r] = d
		})
	}
	wg.Wait()
	for _, d := range ds {
		if d != nil {
			fmt.Printf("rank %d of %d, over %s\n", d.Rank(), d.Size(), d.Transport())
			d.Close()
		}
	}
	// Output:
	// rank 0 of 2, over tcp
	// rank 1 of 2, over tcp
}

// Events returns the same channel on every call, so it may be read in a
// select loop with the program's other work; each event comes once.
func ExampleDetector_Events() {
	job, _ := vigil.NewLocalJob(3)
	defer job.Close()
	ds := make([]*vigil.Detector, 3)
	var wg sync.WaitGroup
	for r := range ds {
		wg.Go(func() {
			cfg := vigil.DefaultConfig()
			cfg.Bootstrap, cfg.StartGrace = job.Bootstrap(r), 200*time.Millisecond
			cfg.SuspectTimeout = 200 * time.Millisecond
			ds[r], _ = vigil.Join(context.Background(), cfg)
		})
	}
	wg.Wait()
	defer ds[0].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ds[1].Leave(ctx, 50*time.Millisecond) // a clean departure
	ds[1].Close()
	ds[2].Close() // a crash: no departure

	work := time.NewTicker(100 * time.Millisecond) // the program's own work
	defer work.Stop()
	deadline := time.After(10 * time.Second)
	for seen := 0; seen < 2; {
		select {
		case ev := <-ds[0].Events():
			what := "crashed"
			if ev.Left {
				what = "left"
			}
			fmt.Printf("rank %d %s\n", ev.Rank, what)
			seen++
		case <-work.C:
		case <-deadline:
			fmt.Println("timed out")
			return
		}
	}
	// Output:
	// rank 1 left
	// rank 2 crashed
}
