package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
)

// envInt returns the integer environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// Correlated bursts: k of n ranks hit at the same instant, killed with
// SIGKILL or stopped with SIGSTOP for longer than δ and continued. The
// ranks lost must be ranks hit only, and every survivor must report the
// same set: all k for a kill; for a stop, the ranks whose own silence an
// observer saw (a stopped rank whose observer was stopped with it may
// resume unnoticed, and lives on). VIGIL_BURST_N, _K and _RUNS size it;
// VIGIL_BURST_ARGS adds agent flags; VIGIL_BURST_LOG names a file for the
// agents' protocol logs (JSON).
func TestE2EBurst(t *testing.T) {
	n, k, runs := envInt("VIGIL_BURST_N", 128), envInt("VIGIL_BURST_K", 16), envInt("VIGIL_BURST_RUNS", 1)
	for _, c := range []struct {
		name  string
		stop  bool
		hosts bool
	}{{"kill random", false, false}, {"stop random", true, false}, {"kill hosts", false, true}, {"stop hosts", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			for run := range runs {
				stab := burstRun(t, n, k, c.stop, c.hosts)
				t.Logf("run %d: %d of %d %s: stable %.0f ms after the burst", run, k, n, c.name, float64(stab)/1e6)
			}
		})
	}
}

// burstRun runs one burst and returns how long after it the last survivor
// learned the last rank lost.
func burstRun(t *testing.T, n, k int, stop, hosts bool) time.Duration {
	const perHost = 8
	delta := 50 * time.Millisecond
	argv := []string{vigilBin, "agent", "-h", "10ms", "-delta", delta.String()}
	argv = append(argv, strings.Fields(os.Getenv("VIGIL_BURST_ARGS"))...)
	opts := launch.Options{Stderr: testWriter{t}}
	if hosts {
		opts.ExtraEnv = []string{bootstrap.EnvRanksPerHost + "=" + strconv.Itoa(perHost)}
	}
	if path := os.Getenv("VIGIL_BURST_LOG"); path != "" {
		logf, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer logf.Close()
		argv = append(argv, "-v", "-log-json")
		opts.Stderr = logf
	}
	job, err := launch.Start(n, argv, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	early, err := job.WaitReady(ctx)
	if err != nil {
		job.Stop(time.Second)
		t.Fatal(err)
	}
	j := followJob(t, job, early)
	hit := map[uint32]bool{}
	defer func() {
		j.job.Stop(5 * time.Second)
		<-j.done
		var worst int64
		var missed uint64
		j.mu.Lock()
		for _, l := range j.lines {
			if l.Ev == "stats" && !hit[l.Rank] {
				worst, missed = max(worst, l.MaxLateNs), missed+l.Missed
			}
		}
		j.mu.Unlock()
		t.Logf("the ranks not hit: heartbeat threads woke up %.1f ms late at worst, %d periods missed in all", float64(worst)/1e6, missed)
	}()
	time.Sleep(2 * time.Second)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for len(hit) < k {
		if hosts {
			first := uint32(rng.IntN(n/perHost) * perHost)
			for r := first; r < first+perHost && len(hit) < k; r++ {
				hit[r] = true
			}
		} else {
			hit[uint32(rng.IntN(n))] = true
		}
	}
	sig := syscall.SIGKILL
	if stop {
		sig = syscall.SIGSTOP
	}
	at, began := node.Mono(), time.Now()
	for r := range hit {
		j.signal(r, sig)
	}
	if stop {
		time.Sleep(3 * delta)
		for r := range hit {
			if err := j.job.Signal(r, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT to rank %d: %v", r, err)
			}
		}
	}
	// Lost: for a kill every rank hit; for a stop the ranks reported (see
	// below), counted anew at each look.
	var lost map[uint32]bool
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(500 * time.Millisecond)
		lost = map[uint32]bool{}
		if !stop {
			lost = hit
		}
		var false_ []string // every live rank reported, with who reported it
		for d, by := range j.deadReports() {
			if !hit[d] {
				var reporters []uint32
				for r := range by {
					if stop && hit[r] {
						// A stopped rank, resumed and not yet evicted, may
						// report its emitter, which turned its heartbeats
						// away from it (a known limit: the survivors must
						// not follow it, and are checked).
						t.Logf("burst %v: resumed rank %d reported live rank %d before its eviction", members(hit), r, d)
						continue
					}
					reporters = append(reporters, r)
				}
				if len(reporters) > 0 && len(false_) < 8 {
					slices.Sort(reporters)
					false_ = append(false_, fmt.Sprintf("live rank %d reported dead by %v (its heartbeat thread: %s)", d, reporters, j.emitterStats(d)))
				}
				continue
			}
			for r := range by {
				// A stopped rank is lost once a rank that was not
				// stopped, or that the job did not evict, reported it: a
				// resumed rank evicted soon after may have reported
				// another resumed rank that no one else holds dead.
				if !stop || !hit[r] || !j.evicted(r) {
					lost[d] = true
				}
			}
		}
		if len(false_) > 0 {
			slices.Sort(false_)
			t.Fatalf("burst %v:\n%s", members(hit), strings.Join(false_, "\n"))
		}
		missing := ""
		rep := j.deadReports()
		for d := range lost {
			for r := uint32(0); r < uint32(n); r++ {
				if _, ok := rep[d][r]; !ok && !lost[r] && !(stop && j.evicted(r)) {
					missing = fmt.Sprintf("rank %d has not reported %d", r, d)
				}
			}
		}
		// Complete, and 3 s after the burst: late false reports are seen.
		if missing == "" && time.Since(began) > 3*time.Second {
			var last int64
			for d := range lost {
				for _, l := range rep[d] {
					last = max(last, l.DeliveredMono)
				}
			}
			return time.Duration(last - at)
		}
		if time.Now().After(deadline) {
			t.Fatalf("burst %v, lost %v: %s", members(hit), members(lost), missing)
		}
	}
}

// members returns the sorted members of a set of ranks.
func members(s map[uint32]bool) []uint32 {
	var out []uint32
	for r := range s {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// emitterStats returns what rank r's heartbeat thread said of its own
// lateness when r exited (its stats line), waiting up to 2 s for it.
func (j *e2eJob) emitterStats(r uint32) string {
	for range 20 {
		j.mu.Lock()
		for _, l := range j.lines {
			if l.Ev == "stats" && l.Rank == r {
				j.mu.Unlock()
				policy := "normal priority"
				if l.RealTime {
					policy = "SCHED_FIFO"
				}
				return fmt.Sprintf("%s, %d periods missed, worst wake-up %.1f ms late", policy, l.Missed, float64(l.MaxLateNs)/1e6)
			}
		}
		j.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
	return "no stats line"
}
