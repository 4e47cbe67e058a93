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
	"strings"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/settings"
)

// maxLocalRanks bounds vigil run's job: every rank is an agent process on
// this machine.
const maxLocalRanks = 4096

// stopGrace is how long vigil run's agents may take to leave once the job
// ends (SIGTERM, SIGINT, -t) before they are killed: the job ends within a
// second of the signal.
const stopGrace = 800 * time.Millisecond

// runUsage is vigil run's usage, before its flags.
const runUsage = `usage: vigil run -n N [flags]                   N detector agents, their events printed
       vigil run -n N [-t d] [-ranks-per-host k] -- PROGRAM [ARGS...]
                                               N copies of PROGRAM, each a rank of one job

With a PROGRAM, every copy gets the environment that vigil.Join (Go) and
vigil_init_from_env (libvigil) read; the program configures its detector
itself (libvigil: VIGIL_H, VIGIL_DELTA, ... in the environment, which is
passed on). vigil run prints a rank → pid table, then each rank's exit with
the time since the start; SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 are
forwarded to the ranks (a second SIGINT, SIGTERM or SIGHUP kills them).
Exit status: 0 every rank exited with status 0; 1 vigil run failed; 2 a bad
invocation; 3 a rank exited with a non-zero status; 4 a rank was killed by
a signal (the last line names the ranks, their pids and how they ended).

flags:
`

// programFlags are the flags that apply with a PROGRAM: the others
// configure vigil's own agents.
var programFlags = map[string]bool{"n": true, "t": true, "ranks-per-host": true}

// runOptions are vigil run's flags.
type runOptions struct {
	n, perHost  int
	dur         time.Duration
	metricsAddr string
	df          detectorFlags
	nf          addrFlags
}

// runFlags defines vigil run's flags from the settings table.
func runFlags() (*flag.FlagSet, *runOptions) {
	o := new(runOptions)
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), runUsage)
		fs.PrintDefaults()
	}
	settingVar(fs, "n", &o.n)
	settingVar(fs, "t", &o.dur)
	settingVar(fs, "ranks-per-host", &o.perHost)
	settingVar(fs, "metrics-addr", &o.metricsAddr)
	o.df.register(fs)
	o.nf.register(fs)
	return fs, o
}

func runMain(args []string) error {
	start, startMono := time.Now(), node.Mono()
	fs, o := runFlags()
	n, dur, perHost, metricsAddr, df, nf := &o.n, &o.dur, &o.perHost, &o.metricsAddr, &o.df, &o.nf
	if err := fs.Parse(args); err != nil {
		return asUsage(err)
	}
	prog, err := programArgs(args, fs.Args(), *n)
	if err != nil {
		return err
	}
	if *n < 1 || *n > maxLocalRanks {
		return usageErrorf("-n %d: want 1 to %d (every rank is a process on this machine; launch larger jobs with mpirun or srun)", *n, maxLocalRanks)
	}
	var opts launch.Options
	if *perHost < 0 {
		return usageErrorf("-ranks-per-host %d: want ≥ 0", *perHost)
	} else if *perHost > 0 {
		opts.ExtraEnv = []string{bootstrap.EnvRanksPerHost + "=" + strconv.Itoa(*perHost)}
	}
	if err := settings.CheckBound(settings.RunFor, *dur); err != nil {
		return usageError{errors.New(err.(*settings.BoundError).In(settings.FlagNames))}
	}
	if prog != nil {
		var agentOnly []string
		fs.Visit(func(f *flag.Flag) {
			if !programFlags[f.Name] {
				agentOnly = append(agentOnly, "-"+f.Name)
			}
		})
		if len(agentOnly) > 0 {
			return usageErrorf("%s configure vigil's own agents, not a program launched after --: the program configures its detector itself (Go: vigil.Config; libvigil: VIGIL_H, VIGIL_DELTA, ... in the environment, which vigil run passes on)", strings.Join(agentOnly, ", "))
		}
		return runProgram(*n, prog, *dur, opts, start, startMono)
	}
	if err := nf.validate(); err != nil {
		return asUsage(err)
	}
	if err := df.validate(*n); err != nil {
		return err
	}
	if err := checkRunMetricsAddr(*metricsAddr); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	argv := append(append([]string{self, "agent"}, df.args()...), nf.args()...)
	if *metricsAddr != "" {
		argv = append(argv, "-metrics-addr", *metricsAddr)
	}
	// Signals from now on: the agents are in their own process groups, so
	// a terminal's Ctrl-C reaches vigil run alone, which stops them.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	job, err := launch.Start(*n, argv, opts)
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			job.Stop(stopGrace)
		}
	}()
	w := watchRanks(job, os.Stdout, start, startMono)
	w.table("vigil agent")
	// A signal during start-up ends it too, within stopGrace.
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
	lines := job.Lines
loop:
	for lines != nil || w.live > 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				lines = nil
				continue
			}
			if l.Ev == "dead" {
				what := "crashed"
				if l.Left {
					what = "left"
				}
				fmt.Printf("%s rank %d: rank %d (pid %d) %s (detected by %d)\n", w.at(l.Mono), l.Rank, l.Dead, w.pid(l.Dead), what, l.Detector)
			}
		case p := <-w.exits:
			w.exited(p)
		case <-sigs:
			break loop
		case <-stop:
			break loop
		}
	}
	job.Stop(stopGrace) // the agents leave cleanly
	stopped = true
	return w.status()
}

// programArgs returns the program vigil run is to launch, given the
// command line and what is left of it after the flags: nil for none (the
// agents), or a usage error for arguments that are not a program after --.
func programArgs(args, rest []string, n int) ([]string, error) {
	dashed := len(args) > len(rest) && args[len(args)-len(rest)-1] == "--"
	switch {
	case len(rest) > 0 && !dashed:
		return nil, usageErrorf("unexpected argument %q: to launch a program, put it after --, as in: vigil run -n %d -- %s",
			rest[0], n, strings.Join(rest, " "))
	case dashed && len(rest) == 0:
		return nil, usageErrorf("nothing after --: give the program to launch, as in: vigil run -n %d -- ./myprog", n)
	case len(rest) == 0:
		return nil, nil
	}
	return rest, nil
}

// runProgram launches n copies of prog and follows them until they have
// all exited: the rank → pid table, each exit, the signals forwarded, and
// the status naming the ranks that died.
func runProgram(n int, prog []string, dur time.Duration, opts launch.Options, start time.Time, startMono int64) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	opts.Stdout = os.Stdout
	job, err := launch.Start(n, prog, opts)
	if err != nil {
		return err
	}
	defer job.Stop(time.Second) // every rank has exited: releases the bootstrap
	w := watchRanks(job, os.Stderr, start, startMono)
	w.table(prog[0])
	var stop <-chan time.Time
	if dur > 0 {
		stop = time.After(dur)
	}
	terms := 0 // terminating signals forwarded
	for w.live > 0 {
		select {
		case p := <-w.exits:
			w.exited(p)
		case sig := <-sigs:
			switch {
			case sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2:
				w.signal(sig)
			case terms == 0:
				terms++
				fmt.Fprintf(os.Stderr, "%s vigil run: %s forwarded to the ranks (again: kill them)\n", w.now(), signalName(sig))
				w.signal(sig)
			default:
				fmt.Fprintf(os.Stderr, "%s vigil run: %s again: killing the ranks\n", w.now(), signalName(sig))
				w.signal(syscall.SIGKILL)
			}
		case <-stop:
			terms++
			fmt.Fprintf(os.Stderr, "%s vigil run: -t %v elapsed: SIGTERM to the ranks\n", w.now(), dur)
			w.signal(syscall.SIGTERM)
		}
	}
	return w.status()
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
