package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
)

// maxLocalRanks bounds vigil run's job: every rank is an agent process on
// this machine.
const maxLocalRanks = 4096

func runMain(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	n := fs.Int("n", 4, "number of ranks")
	dur := duration(fs, "t", 0, "stop the job after this long (0: until interrupted)")
	perHost := fs.Int("ranks-per-host", 0, "pretend the ranks are placed this many per host (rank r on host r/k), for host-aware block mending on one machine (0: no hosts)")
	var df detectorFlags
	df.register(fs, node.DefaultHeartbeatPeriod, 5*node.DefaultHeartbeatPeriod)
	var nf addrFlags
	nf.register(fs)
	if err := fs.Parse(args); err != nil {
		return asUsage(err)
	}
	if err := nf.validate(); err != nil {
		return asUsage(err)
	}
	if *n < 1 || *n > maxLocalRanks {
		return usageErrorf("-n %d: want 1 to %d (every rank is a process on this machine; launch larger jobs with mpirun or srun)", *n, maxLocalRanks)
	}
	if err := df.validate(*n); err != nil {
		return err
	}
	var opts launch.Options
	if *perHost < 0 {
		return fmt.Errorf("-ranks-per-host %d: want ≥ 0", *perHost)
	} else if *perHost > 0 {
		opts.ExtraEnv = []string{bootstrap.EnvRanksPerHost + "=" + strconv.Itoa(*perHost)}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	job, err := launch.Start(*n, append(append([]string{self, "agent"}, df.args()...), nf.args()...), opts)
	if err != nil {
		return err
	}
	defer job.Stop(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	_, err = job.WaitReady(ctx)
	cancel()
	if err != nil {
		return err
	}
	fmt.Printf("vigil: %d ranks up (h=%v δ=%v, %s over %s); kill any agent to see it reported\n",
		*n, df.h, df.delta, df.broadcast, df.transport)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	var stop <-chan time.Time
	if *dur > 0 {
		stop = time.After(*dur)
	}
	for {
		select {
		case l, ok := <-job.Lines:
			if !ok {
				return nil
			}
			if l.Ev == "dead" {
				what := "crashed"
				if l.Left {
					what = "left"
				}
				fmt.Printf("rank %d: rank %d %s (detected by %d)\n", l.Rank, l.Dead, what, l.Detector)
			}
		case <-sigs:
			return nil
		case <-stop:
			return nil
		}
	}
}
