package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/node"
)

// TestE2EJobStop stops a whole job of 128 agents at once, as a launcher
// does when the job ends (SIGTERM to every agent in one sweep): every agent
// leaves, none reports a crash, none is evicted, and every one prints its
// statistics and says bye. Three jobs in a row (a few seconds each);
// VIGIL_JOBSTOP_RUNS sets another count (the 20-run acceptance loop is
// `vigil-bench jobstop`), VIGIL_JOBSTOP_LOG a directory for the agents'
// protocol logs (JSON, one file per job) and VIGIL_JOBSTOP_FLAGS more
// agent flags.
func TestE2EJobStop(t *testing.T) {
	const n = 128
	runs := 3
	if v, err := strconv.Atoi(os.Getenv("VIGIL_JOBSTOP_RUNS")); err == nil && v > 0 {
		runs = v
	}
	bad := 0
	for run := 1; run <= runs; run++ {
		ok := t.Run("run"+strconv.Itoa(run), func(t *testing.T) {
			flags := []string{"-h", "10ms", "-delta", "50ms"}
			if x := os.Getenv("VIGIL_JOBSTOP_FLAGS"); x != "" {
				flags = append(flags, strings.Fields(x)...)
			}
			var j *e2eJob
			if dir := os.Getenv("VIGIL_JOBSTOP_LOG"); dir != "" {
				// The agents' protocol log, as JSON, one file per run.
				f, err := os.Create(filepath.Join(dir, "run"+strconv.Itoa(run)+".log"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				j = startJobTo(t, n, f, append(flags, "-v", "-log-json")...)
			} else {
				j = startJob(t, n, flags...)
			}
			time.Sleep(time.Second)
			t.Logf("stop at mono %d", node.Mono())
			j.job.Stop(10 * time.Second)
			<-j.done
			stats := j.checkFailureFree()
			byes := 0
			j.mu.Lock()
			for _, l := range j.lines {
				if l.Ev == "bye" {
					byes++
				}
			}
			j.mu.Unlock()
			if stats != n || byes != n {
				t.Errorf("%d of %d agents printed their statistics, %d said bye", stats, n, byes)
			}
			for _, p := range j.job.Procs {
				if err := p.Err(); err != nil {
					t.Errorf("rank %d exited with %v", p.Rank, err)
				}
			}
		})
		if !ok {
			bad++
		}
	}
	if runs > 1 {
		t.Logf("job-wide stop of %d agents: %d of %d runs had a crash report, an eviction or an unclean exit", n, bad, runs)
	}
}
