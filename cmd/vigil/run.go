package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
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

// stopGrace is how long vigil run's agents may take to leave once the job
// ends (SIGTERM, SIGINT, -t) before they are killed: the job ends within a
// second of the signal.
const stopGrace = 800 * time.Millisecond

func runMain(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	n := fs.Int("n", 4, "number of ranks")
	dur := duration(fs, "t", 0, "stop the job after this long (0: until interrupted)")
	perHost := fs.Int("ranks-per-host", 0, "pretend the ranks are placed this many per host (rank r on host r/k), for host-aware block mending on one machine (0: no hosts)")
	metricsAddr := fs.String("metrics-addr", "", "every agent serves Prometheus metrics over HTTP at host:0/metrics, each on a free port, printed at start-up (the agents share the host, so the port must be 0; default: no endpoint)")
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
	if err := node.CheckBound(node.SettingRunFor, *dur); err != nil {
		return usageError{errors.New(err.(*node.BoundError).In(node.FlagNames))}
	}
	if err := checkRunMetricsAddr(*metricsAddr); err != nil {
		return err
	}
	var opts launch.Options
	if *perHost < 0 {
		return usageErrorf("-ranks-per-host %d: want ≥ 0 (0: no hosts)", *perHost)
	} else if *perHost > 0 {
		opts.ExtraEnv = []string{bootstrap.EnvRanksPerHost + "=" + strconv.Itoa(*perHost)}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	argv := append(append([]string{self, "agent"}, df.args()...), nf.args()...)
	if *metricsAddr != "" {
		argv = append(argv, "-metrics-addr", *metricsAddr)
	}
	// SIGTERM and SIGINT end the job at any time, start-up included,
	// within stopGrace: the agents leave, and are killed if they have not
	// exited by then.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	job, err := launch.Start(*n, argv, opts)
	if err != nil {
		return err
	}
	defer job.Stop(stopGrace)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	go func() {
		select {
		case s := <-sigs:
			select {
			case sigs <- s: // for the loop below, if start-up just ended
			default:
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err = job.WaitReady(ctx)
	cancel()
	if err != nil {
		if len(sigs) > 0 {
			return nil // interrupted during start-up
		}
		return err
	}
	fmt.Printf("vigil: %d ranks up (h=%v δ=%v, %s over %s); kill any agent to see it reported\n",
		*n, df.h, df.delta, df.broadcast, df.transport)
	if *metricsAddr != "" {
		for _, l := range job.Ready() {
			fmt.Printf("rank %d: metrics at http://%s/metrics\n", l.Rank, l.Metrics)
		}
	}
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

// checkRunMetricsAddr checks vigil run's -metrics-addr (empty: no
// endpoint): host:0, since every agent runs on this machine and a fixed
// port cannot be shared.
func checkRunMetricsAddr(addr string) error {
	if err := checkMetricsAddr(addr); err != nil || addr == "" {
		return err
	}
	if _, port, _ := net.SplitHostPort(addr); port != "0" {
		return usageErrorf("-metrics-addr %q: vigil run's agents share this machine and cannot share a port: give port 0, such as 127.0.0.1:0 (each agent picks a free port, printed at start-up)", addr)
	}
	return nil
}
