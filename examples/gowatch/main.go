// Command gowatch is the README's Go quick start: a rank that prints the
// ranks of its job that die, until SIGTERM or Ctrl-C. Its job comes from
// the launcher: mpirun or srun (build with -tags pmix), or vigil run.
//
//	go build -tags pmix -o gowatch/gowatch ./examples/gowatch
//	mpirun --mca orte_abort_on_non_zero_status 0 -n 4 gowatch/gowatch
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	d, err := vigil.Join(ctx, vigil.DefaultConfig()) // rank, size, peers: from mpirun or vigil run
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d of %d: pid %d ready\n", d.Rank(), d.Size(), os.Getpid())
	events := d.Events()
	for {
		select {
		case ev := <-events:
			what := map[bool]string{false: "died", true: "left"}[ev.Left]
			fmt.Printf("rank %d: rank %d %s (found by rank %d)\n", d.Rank(), ev.Rank, what, ev.Detector)
		case <-ctx.Done():
			d.Leave(context.Background(), 100*time.Millisecond) // the others see "left"
			d.Close()
			return
		}
	}
}
