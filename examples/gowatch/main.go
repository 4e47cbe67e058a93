// Command gowatch is the README's Go quick start: a rank that prints the
// ranks of its job that die, until SIGTERM or Ctrl-C. Its job comes from
// the launcher: mpirun or srun (libpmix is loaded at run time; -tags pmix
// links it instead), or vigil run.
//
//	go build -o gowatch ./examples/gowatch
//	mpirun --mca orte_abort_on_non_zero_status 0 -n 4 ./gowatch -h 100ms -delta 1s
//	vigil run -n 4 -- ./gowatch -h 100ms -delta 1s
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil"
)

func main() {
	cfg := vigil.DefaultConfig()
	flag.DurationVar(&cfg.HeartbeatPeriod, "h", cfg.HeartbeatPeriod, "heartbeat period h")
	flag.DurationVar(&cfg.SuspectTimeout, "delta", cfg.SuspectTimeout, "suspicion time-out δ, the same on every rank")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := vigil.Join(ctx, cfg) // rank, size, peers: from mpirun or vigil run
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d of %d: pid %d ready\n", d.Rank(), d.Size(), os.Getpid())
	events := d.Events() // each rank gone, once
	for {
		select {
		case ev := <-events:
			what := map[bool]string{false: "died", true: "left"}[ev.Left]
			fmt.Printf("rank %d: rank %d %s (found by rank %d)\n", d.Rank(), ev.Rank, what, ev.Detector)
		case <-d.Evicted(): // declared dead while paused or cut off: fail-stop
			log.Fatalf("rank %d was declared dead by the job", d.Rank())
		case <-ctx.Done():
			d.Leave(context.Background(), 100*time.Millisecond) // the others see "left"
			d.Close()
			return
		}
	}
}
