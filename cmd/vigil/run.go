package main

import (
	"context"
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
	if err := checkRunMetricsAddr(*metricsAddr); err != nil {
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
	argv := append(append([]string{self, "agent"}, df.args()...), nf.args()...)
	if *metricsAddr != "" {
		argv = append(argv, "-metrics-addr", *metricsAddr)
	}
	job, err := launch.Start(*n, argv, opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	_, err = job.WaitReady(ctx)
	cancel()
	if err != nil {
		job.Stop(3 * time.Second)
		return err
	}
	fmt.Printf("vigil: %d ranks up (h=%v δ=%v, %s over %s); kill any agent to see it reported\n",
		*n, df.h, df.delta, df.broadcast, df.transport)
	if *metricsAddr != "" {
		for _, l := range job.Ready() {
			fmt.Printf("rank %d: metrics at http://%s/metrics\n", l.Rank, l.Metrics)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var timeUp <-chan time.Time
	if *dur > 0 {
		timeUp = time.After(*dur)
	}
	// Until the stop, every crash and departure is printed. Once the job
	// stops (every agent leaves), the departures are expected and only
	// counted; a crash report or an eviction then is printed as at any
	// other time, and the summary counts them.
	var stopping bool
	var stopped chan struct{}
	var st stopTally
	for {
		select {
		case l, ok := <-job.Lines:
			if !ok {
				if stopping {
					<-stopped
					fmt.Println(st.summary(*n))
				}
				return nil
			}
			switch {
			case l.Ev == "dead" && (!stopping || !l.Left):
				what := "crashed"
				if l.Left {
					what = "left"
				}
				fmt.Printf("rank %d: rank %d %s (detected by %d)\n", l.Rank, l.Dead, what, l.Detector)
			case l.Ev == "evicted":
				fmt.Printf("rank %d: declared dead by the job (it was paused or cut off for longer than δ); it stopped\n", l.Rank)
			}
			if stopping {
				st.add(l)
			}
		case <-sigs:
			if stopping {
				continue
			}
			stopping = true
			timeUp = nil
		case <-timeUp:
			stopping = true
			timeUp = nil
		}
		if stopping && stopped == nil {
			// Stop in the background: the agents' lines are read meanwhile,
			// or an agent blocked writing one would not leave.
			stopped = make(chan struct{})
			go func() { job.Stop(3 * time.Second); close(stopped) }()
		}
	}
}

// stopTally counts what the agents printed while the job stopped.
type stopTally struct {
	left, crashed, evicted, bye int
}

func (t *stopTally) add(l launch.Line) {
	switch {
	case l.Ev == "dead" && l.Left:
		t.left++
	case l.Ev == "dead":
		t.crashed++
	case l.Ev == "evicted":
		t.evicted++
	case l.Ev == "bye":
		t.bye++
	}
}

// summary is the line vigil run prints once the job has stopped.
func (t *stopTally) summary(n int) string {
	return fmt.Sprintf("vigil: job stopped: %d of %d agents left cleanly; %d crash reports and %d evictions during the stop",
		t.bye, n, t.crashed, t.evicted)
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
