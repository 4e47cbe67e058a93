package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/launch"
)

// The job-stop part's ways of stopping a job.
const (
	// JobStopGroup is the local launcher's stop: one SIGTERM to the
	// agents' process group (launch.Job.Stop).
	JobStopGroup = "group"
	// JobStopEach sends SIGTERM agent by agent, as a launcher that signals
	// its processes one at a time (mpirun's daemons) does, then stops the
	// job.
	JobStopEach = "each"
)

// JobStopConfig is the job-stop part (issue #29): a whole job of N agents
// stopped at once, Runs times per N and way, interleaved; a clean stop
// prints no crash report and no eviction.
type JobStopConfig struct {
	VigilBin string
	Ns       []int
	// Ways are JobStopGroup and/or JobStopEach.
	Ways []string
	Runs int
	// H and Delta are the agents' h and δ.
	H, Delta time.Duration
	Log      io.Writer
	// AgentLogs, if set, is a directory where each stop's agents log
	// their protocol activity (-v -log-json), one file per stop
	// (N-way-run.json).
	AgentLogs string
}

// JobStopRun is one stop of one job.
type JobStopRun struct {
	N   int
	Way string
	Run int
	// Crashes counts the crash reports printed during the stop, Evicted
	// the agents declared dead, Bye the agents that left cleanly, Unclean
	// the agents that exited with an error or were killed.
	Crashes, Evicted, Bye, Unclean int
	// Took is the time from the stop until every agent had exited.
	Took time.Duration
}

// Clean reports whether the stop reported no one.
func (r JobStopRun) Clean() bool {
	return r.Crashes == 0 && r.Evicted == 0 && r.Unclean == 0 && r.Bye == r.N
}

// JobStop runs the part.
func JobStop(ctx context.Context, cfg JobStopConfig) ([]JobStopRun, error) {
	var runs []JobStopRun
	for run := range cfg.Runs {
		for _, n := range cfg.Ns {
			for _, way := range cfg.Ways {
				if err := ctx.Err(); err != nil {
					return runs, err
				}
				r, err := jobStopRun(cfg, n, way, run)
				if err != nil {
					return runs, fmt.Errorf("jobstop N=%d %s run %d: %w", n, way, run, err)
				}
				r.Run = run
				runs = append(runs, r)
				if cfg.Log != nil {
					fmt.Fprintf(cfg.Log, "jobstop N=%-4d %-5s run %2d: %d crash reports, %d evicted, %d of %d said bye, %d unclean exits, all exited after %v\n",
						n, way, run, r.Crashes, r.Evicted, r.Bye, n, r.Unclean, r.Took.Round(time.Millisecond))
				}
			}
		}
	}
	return runs, nil
}

func jobStopRun(cfg JobStopConfig, n int, way string, run int) (JobStopRun, error) {
	r := JobStopRun{N: n, Way: way}
	argv := []string{cfg.VigilBin, "agent", "-h", cfg.H.String(), "-delta", cfg.Delta.String(), "-grace", "1s"}
	opts := launch.Options{Stderr: io.Discard}
	if cfg.AgentLogs != "" {
		f, err := os.Create(filepath.Join(cfg.AgentLogs, fmt.Sprintf("%d-%s-%d.json", n, way, run)))
		if err != nil {
			return r, err
		}
		defer f.Close()
		argv = append(argv, "-v", "-log-json")
		opts.Stderr = f
	}
	job, err := launch.Start(n, argv, opts)
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if _, err := job.WaitReady(ctx); err != nil {
		job.Stop(time.Second)
		return r, err
	}
	done := make(chan struct{})
	var lines []launch.Line
	go func() {
		defer close(done)
		for l := range job.Lines {
			lines = append(lines, l)
		}
	}()
	time.Sleep(1500 * time.Millisecond) // past the start-up grace
	t0 := time.Now()
	if way == JobStopEach {
		for _, p := range job.Procs {
			p.Cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	job.Stop(20 * time.Second)
	r.Took = time.Since(t0)
	<-done
	for _, l := range lines {
		switch {
		case l.Ev == "dead" && !l.Left:
			r.Crashes++
		case l.Ev == "evicted":
			r.Evicted++
		case l.Ev == "bye":
			r.Bye++
		}
	}
	for _, p := range job.Procs {
		if p.Err() != nil {
			r.Unclean++
		}
	}
	return r, nil
}

// JobStopTable prints, per N and way, how many stops were clean.
func JobStopTable(p func(string, ...any), cfg JobStopConfig, runs []JobStopRun) {
	p("Job-wide stop: N agents at h=%v δ=%v stopped at once, %d runs per row, interleaved; group: one SIGTERM to the agents' process group (vigil run, the local launcher), each: SIGTERM agent by agent, then the group\n\n", cfg.H, cfg.Delta, cfg.Runs)
	p("| N | stop | runs | clean runs | crash reports (sum, max) | evictions (sum) | unclean exits (sum) | all exited after: median, max |\n|---:|---|---:|---:|---|---:|---:|---|\n")
	for _, n := range cfg.Ns {
		for _, way := range cfg.Ways {
			var took []time.Duration
			clean, crashes, worst, evicted, unclean := 0, 0, 0, 0, 0
			for _, r := range runs {
				if r.N != n || r.Way != way {
					continue
				}
				took = append(took, r.Took)
				if r.Clean() {
					clean++
				}
				crashes += r.Crashes
				worst = max(worst, r.Crashes)
				evicted += r.Evicted
				unclean += r.Unclean
			}
			if len(took) == 0 {
				continue
			}
			slices.Sort(took)
			p("| %d | %s | %d | %d | %d, %d | %d | %d | %v, %v |\n", n, way, len(took), clean, crashes, worst, evicted, unclean,
				took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
		}
	}
}
