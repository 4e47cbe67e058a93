// Command detect is the smallest Go program using Vigil: every rank joins
// the job's failure detector, prints each rank it learns is gone, and
// leaves cleanly on SIGINT or SIGTERM.
//
//	go build -o detect ./examples/detect
//	vigil run -n 4 -- ./detect       # prints each rank's pid
//	kill -9 <a rank's pid>           # the other ranks print it
//
// Flags: -h, the heartbeat period, and -delta, the suspicion time-out δ
// (vigil.DefaultConfig's by default: 10ms and 5×h). A busy machine needs a
// larger δ, such as -delta 500ms: a rank silent for δ is declared dead.
//
// The same binary runs under mpirun or srun: it loads the PMIx library at
// run time (Debian: libpmix2, which Open MPI brings; -tags pmix links it
// instead):
//
//	mpirun -n 4 ./detect -delta 500ms
//
// Lines on standard output:
//
//	rank R of N: up
//	rank R: rank D crashed (detected by rank X)
//	rank R: rank D left (detected by rank X)
//	rank R: left the job
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil"
)

func main() {
	cfg := vigil.DefaultConfig()
	flag.DurationVar(&cfg.HeartbeatPeriod, "h", cfg.HeartbeatPeriod, "heartbeat period h")
	flag.DurationVar(&cfg.SuspectTimeout, "delta", cfg.SuspectTimeout, "suspicion time-out δ, above h")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	d, err := vigil.Join(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "detect:", err)
		os.Exit(1)
	}
	fmt.Printf("rank %d of %d: up\n", d.Rank(), d.Size())
	for {
		select {
		case ev := <-d.Events(): // the same channel on every call
			what := "crashed"
			if ev.Left {
				what = "left"
			}
			fmt.Printf("rank %d: rank %d %s (detected by rank %d)\n", d.Rank(), ev.Rank, what, ev.Detector)
		case <-d.Evicted():
			fmt.Fprintf(os.Stderr, "detect: rank %d was declared dead by the job (paused or cut off for longer than δ)\n", d.Rank())
			d.Close()
			os.Exit(1)
		case <-ctx.Done():
			leave, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := d.Leave(leave, 100*time.Millisecond)
			cancel()
			d.Close()
			if err != nil {
				fmt.Fprintf(os.Stderr, "detect: rank %d: leave: %v\n", d.Rank(), err)
				os.Exit(1)
			}
			fmt.Printf("rank %d: left the job\n", d.Rank())
			return
		}
	}
}
