package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
)

// The multi-process tests run the real binary: N `vigil agent` processes
// over TCP on loopback, bootstrapped by the local launcher, with failures
// injected by real signals.

var vigilBin string

func TestMain(m *testing.M) {
	if os.Getenv(envShmConnect) != "" {
		shmConnectMain() // hostile_e2e_test.go: run again as another user
	}
	dir, err := os.MkdirTemp("", "vigil-e2e-")
	if err != nil {
		panic(err)
	}
	vigilBin = filepath.Join(dir, "vigil")
	out, err := exec.Command("go", "build", "-o", vigilBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building vigil: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// e2eJob wraps a launched job and keeps every line it printed.
type e2eJob struct {
	t      *testing.T
	job    *launch.Job
	mu     sync.Mutex
	lines  []launch.Line
	killed map[uint32]bool
	done   chan struct{}
	// readyAt is CLOCK_MONOTONIC when every agent was ready (the agents'
	// lines carry the same clock).
	readyAt int64
}

func startJob(t *testing.T, n int, flags ...string) *e2eJob {
	t.Helper()
	return startJobTo(t, n, testWriter{t}, flags...)
}

// startJobTo is startJob with the agents' standard error going to stderr.
func startJobTo(t *testing.T, n int, stderr io.Writer, flags ...string) *e2eJob {
	t.Helper()
	argv := append([]string{vigilBin, "agent"}, flags...)
	job, err := launch.Start(n, argv, launch.Options{Stderr: stderr})
	if err != nil {
		t.Fatal(err)
	}
	return awaitReady(t, job)
}

// awaitReady waits up to a minute for every agent of job to be ready (their
// ready lines: job.Ready()), stopping it and failing t otherwise, and
// follows it.
func awaitReady(t *testing.T, job *launch.Job) *e2eJob {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	early, err := job.WaitReady(ctx)
	if err != nil {
		job.Stop(time.Second)
		t.Fatal(err)
	}
	return followJob(t, job, early)
}

// followJob collects a ready job's lines from now on, after early.
func followJob(t *testing.T, job *launch.Job, early []launch.Line) *e2eJob {
	j := &e2eJob{t: t, job: job, lines: early, killed: map[uint32]bool{}, done: make(chan struct{}), readyAt: node.Mono()}
	go func() {
		defer close(j.done)
		for l := range job.Lines {
			j.mu.Lock()
			j.lines = append(j.lines, l)
			j.mu.Unlock()
		}
	}()
	t.Cleanup(func() { job.Stop(5 * time.Second); <-j.done })
	return j
}

// startPiped starts cmd with its stderr in the test log and returns its
// stdout.
func startPiped(t *testing.T, cmd *exec.Cmd) io.Reader {
	t.Helper()
	cmd.Stderr = testWriter{t}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return out
}

// testWriter sends agents' stderr to the test log (shown on failure).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("agent: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (j *e2eJob) signal(r uint32, sig syscall.Signal) {
	j.t.Helper()
	if err := j.job.Signal(r, sig); err != nil {
		j.t.Fatal(err)
	}
}

func (j *e2eJob) kill(r uint32) {
	j.killed[r] = true
	j.signal(r, syscall.SIGKILL)
}

// deadReports returns, for each rank reported dead, the set of reporters.
func (j *e2eJob) deadReports() map[uint32]map[uint32]launch.Line {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[uint32]map[uint32]launch.Line{}
	for _, l := range j.lines {
		if l.Ev != "dead" {
			continue
		}
		if out[l.Dead] == nil {
			out[l.Dead] = map[uint32]launch.Line{}
		}
		out[l.Dead][l.Rank] = l
	}
	return out
}

// checkAccuracy fails on any report of a rank not in gone.
func (j *e2eJob) checkAccuracy(gone map[uint32]bool) {
	j.t.Helper()
	for d, by := range j.deadReports() {
		if !gone[d] {
			for r := range by {
				j.t.Fatalf("rank %d falsely reported live rank %d dead", r, d)
			}
		}
	}
}

// waitComplete waits until every rank not in gone reported every rank in
// gone, checking accuracy all along.
func (j *e2eJob) waitComplete(n int, gone map[uint32]bool, timeout time.Duration) {
	j.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j.checkAccuracy(gone)
		rep := j.deadReports()
		missing := ""
		for d := range gone {
			for r := uint32(0); r < uint32(n); r++ {
				if _, ok := rep[d][r]; !ok && !gone[r] {
					missing = fmt.Sprintf("rank %d has not reported %d", r, d)
				}
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("after %v: %s", timeout, missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestE2EKillRandomRanks(t *testing.T) {
	const n = 16
	j := startJob(t, n, "-h", "10ms", "-delta", "100ms")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	time.Sleep(500 * time.Millisecond)
	for len(j.killed) < 3 {
		r := uint32(rng.IntN(n))
		if !j.killed[r] {
			t.Logf("kill -9 rank %d", r)
			j.kill(r)
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
		}
	}
	j.waitComplete(n, j.killed, 30*time.Second)
	for d, by := range j.deadReports() {
		for _, l := range by {
			if l.Left {
				t.Fatalf("crash of %d reported as a departure by %d", d, l.Rank)
			}
		}
	}
}

func TestE2ESigstopLongerThanDeltaIsReported(t *testing.T) {
	const n = 16
	delta := 100 * time.Millisecond
	j := startJob(t, n, "-h", "10ms", "-delta", delta.String())
	time.Sleep(500 * time.Millisecond)
	const victim = 7
	j.signal(victim, syscall.SIGSTOP)
	time.Sleep(6 * delta)
	gone := map[uint32]bool{victim: true}
	j.waitComplete(n, gone, 30*time.Second)
	// Resumed, the rank learns it was declared dead and stops (fail-stop)
	// instead of suspecting anyone with stale knowledge.
	j.signal(victim, syscall.SIGCONT)
	select {
	case <-j.job.Procs[victim].Exited():
	case <-time.After(20 * time.Second):
		t.Fatal("a rank declared dead kept running after SIGCONT")
	}
	time.Sleep(10 * delta)
	j.checkAccuracy(gone)
	j.mu.Lock()
	evicted := false
	for _, l := range j.lines {
		evicted = evicted || (l.Ev == "evicted" && l.Rank == victim)
	}
	j.mu.Unlock()
	if !evicted {
		t.Fatal("the resumed rank did not report its eviction")
	}
}

func TestE2ESigstopShorterThanDeltaMinusHIsNotReported(t *testing.T) {
	const n = 16
	h, delta := 10*time.Millisecond, 100*time.Millisecond
	j := startJob(t, n, "-h", h.String(), "-delta", delta.String())
	time.Sleep(500 * time.Millisecond)
	// A stop is meant to last (δ − h)/2; on a loaded host the test itself
	// may be late to send SIGCONT. A stop that really lasted δ − h or more
	// may rightly be reported: such a victim is left out of the check.
	late := map[uint32]bool{}
	for i := 0; i < 10; i++ {
		victim := uint32(3 + i)
		j.signal(victim, syscall.SIGSTOP)
		stopped := time.Now()
		time.Sleep((delta - h) / 2)
		j.signal(victim, syscall.SIGCONT)
		if d := time.Since(stopped); d >= delta-h {
			t.Logf("rank %d stayed stopped %v (≥ δ − h): not checked", victim, d)
			late[victim] = true
		}
		time.Sleep(3 * delta)
	}
	if len(late) > 5 {
		t.Fatalf("%d of 10 stops lasted δ − h or more: the host is too loaded for this test", len(late))
	}
	time.Sleep(5 * delta)
	j.checkAccuracy(late)
}

// burn keeps every CPU busy until stop is closed.
func burn(stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for i := 0; i < runtime.NumCPU(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			x := uint64(1)
			for {
				select {
				case <-stop:
					return
				default:
				}
				for k := 0; k < 1_000_000; k++ {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
		}()
	}
	return &wg
}

func TestE2ENoFalseSuspicionUnderCPULoad(t *testing.T) {
	const n = 16
	dur := 60 * time.Second
	if testing.Short() {
		dur = 10 * time.Second
	}
	j := startJob(t, n, "-h", "10ms", "-delta", "50ms")
	stop := make(chan struct{})
	wg := burn(stop)
	time.Sleep(dur)
	close(stop)
	wg.Wait()
	// Collect the agents' own counters of missed heartbeat deadlines.
	j.job.Stop(5 * time.Second)
	<-j.done
	var missed uint64
	var worst int64
	rt := 0
	j.mu.Lock()
	for _, l := range j.lines {
		if l.Ev == "stats" {
			missed += l.Missed
			worst = max(worst, l.MaxLateNs)
			if l.RealTime {
				rt++
			}
		}
	}
	j.mu.Unlock()
	t.Logf("%v with %d CPU burners, 16 ranks, h=10ms δ=50ms: %d missed heartbeat deadlines, worst emitter lateness %.2f ms, %d emitters with SCHED_FIFO",
		dur, runtime.NumCPU(), missed, float64(worst)/1e6, rt)
	j.checkFailureFree()
}

// logEmitterStats logs, over the agents' "stats" lines, the missed
// heartbeat deadlines, the worst emitter lateness and the event-loop
// wake-ups: what a false report in a failure-free run is read against.
func (j *e2eJob) logEmitterStats() {
	j.t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	var missed, wakes, rejected uint64
	var worst int64
	worstRank := uint32(0)
	for _, l := range j.lines {
		if l.Ev != "stats" {
			continue
		}
		missed += l.Missed
		wakes += l.LoopWakes
		rejected += l.Rejected
		if l.MaxLateNs > worst {
			worst, worstRank = l.MaxLateNs, l.Rank
		}
	}
	j.t.Logf("emitters: %d missed deadlines in all, worst lateness %.2f ms (rank %d); %d event-loop wake-ups, %d rejected frames",
		missed, float64(worst)/1e6, worstRank, wakes, rejected)
}

// logDetections logs each crash report by its detector: when, after the
// job was ready, and both ranks' emitter statistics (to read a false
// report against).
func (j *e2eJob) logDetections() {
	j.t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	stats := map[uint32]launch.Line{}
	for _, l := range j.lines {
		if l.Ev == "stats" {
			stats[l.Rank] = l
		}
	}
	for _, l := range j.lines {
		if l.Ev != "dead" || l.Left || l.Rank != l.Detector {
			continue
		}
		d, v := stats[l.Rank], stats[l.Dead]
		j.t.Logf("rank %d detected rank %d %.3f s after the job was ready; detector: %d missed, worst %.2f ms, %d heartbeats; reported: %d missed, worst %.2f ms, %d heartbeats",
			l.Rank, l.Dead, float64(l.DeliveredMono-j.readyAt)/1e9, d.Missed, float64(d.MaxLateNs)/1e6, d.HeartbeatsSent,
			v.Missed, float64(v.MaxLateNs)/1e6, v.HeartbeatsSent)
	}
}

// checkFailureFree fails the test for every crash report or eviction the
// job printed, and returns how many agents printed their statistics.
func (j *e2eJob) checkFailureFree() (stats int) {
	j.t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, l := range j.lines {
		switch {
		case l.Ev == "dead" && !l.Left:
			j.t.Errorf("rank %d reported %d crashed during a failure-free run", l.Rank, l.Dead)
		case l.Ev == "evicted":
			j.t.Errorf("rank %d was evicted during a failure-free run", l.Rank)
		case l.Ev == "stats":
			stats++
		}
	}
	return stats
}

// TestE2ESilentAtOneMillisecond: 32 agents at h = 1 ms, δ = 20 ms on this
// 2-core machine run a minute without reporting anyone: the detector does
// not starve itself. Their heartbeat threads run natively (shared memory).
func TestE2ESilentAtOneMillisecond(t *testing.T) {
	const n = 32
	dur := 60 * time.Second
	if testing.Short() {
		dur = 10 * time.Second
	}
	j := startJob(t, n, "-h", "1ms", "-delta", "20ms")
	time.Sleep(dur)
	j.job.Stop(5 * time.Second)
	<-j.done
	j.logEmitterStats()
	j.logDetections()
	j.mu.Lock()
	for _, l := range j.lines {
		if l.Ev == "stats" && !l.NativeEmitter {
			t.Errorf("rank %d: heartbeat thread in Go, want the native thread (shared memory on one host)", l.Rank)
		}
	}
	j.mu.Unlock()
	if stats := j.checkFailureFree(); stats != n {
		t.Errorf("%d of %d agents printed their statistics on leaving", stats, n)
	}
}

func TestE2EDemo(t *testing.T) {
	out, err := exec.Command(vigilBin, "demo").CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("vigil demo: %v", err)
	}
	if !strings.Contains(string(out), "OK: every survivor learned every failure") {
		t.Fatal("demo did not report success")
	}
}

func TestE2ERunCommand(t *testing.T) {
	out, err := exec.Command(vigilBin, "run", "-n", "4", "-t", "2s").CombinedOutput()
	if err != nil {
		t.Fatalf("vigil run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "4 ranks up") {
		t.Fatalf("vigil run did not report its ranks up:\n%s", out)
	}
}

// TestE2ERunMetrics: `vigil run -metrics-addr 127.0.0.1:0` passes the flag
// on to its agents, each serving on its own free port, and prints every
// rank's endpoint, which answers while the job runs.
func TestE2ERunMetrics(t *testing.T) {
	cmd := exec.Command(vigilBin, "run", "-n", "2", "-t", "20s", "-metrics-addr", "127.0.0.1:0")
	out := startPiped(t, cmd)
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	re := regexp.MustCompile(`^rank (\d): metrics at http://(127\.0\.0\.1:\d+)/metrics$`)
	addrs := map[string]string{}
	for sc := bufio.NewScanner(out); len(addrs) < 2 && sc.Scan(); {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			addrs[m[1]] = m[2]
		}
	}
	if len(addrs) != 2 || addrs["0"] == addrs["1"] {
		t.Fatalf("endpoints %v, want one per rank, each on its own port", addrs)
	}
	for r, a := range addrs {
		if m := scrape(t, a); m[`vigil_agent_info{rank="`+r+`",size="2",transport="tcp"}`] != 1 {
			t.Errorf("rank %s's endpoint %s: no vigil_agent_info for it: %v", r, a, m)
		}
	}
}

// TestE2ERealTimeProcess: with -realtime-process every thread of an agent
// runs real-time (SCHED_RR at 1), the heartbeat thread alone SCHED_FIFO at
// priority 2, the agents
// report it, and a kill is still detected by all, accurately.
func TestE2ERealTimeProcess(t *testing.T) {
	const n = 6
	j := startJob(t, n, "-h", "10ms", "-delta", "100ms", "-realtime-process")
	time.Sleep(300 * time.Millisecond)
	if os.Geteuid() == 0 {
		for r, p := range j.job.Procs {
			pid := p.Cmd.Process.Pid
			tids, err := threads(pid)
			if err != nil {
				t.Fatal(err)
			}
			top := 0
			for _, tid := range tids {
				policy, priority, err := heartbeat.ThreadSched(pid, tid)
				if err != nil {
					continue // exited
				}
				switch {
				case priority == 2 && policy == 1: // SCHED_FIFO
					top++
				case priority != 1 || policy != 2: // SCHED_RR
					t.Fatalf("rank %d thread %d: policy %d priority %d, want SCHED_RR (2) at 1 or the heartbeat thread SCHED_FIFO (1) at 2", r, tid, policy, priority)
				}
			}
			if top != 1 {
				t.Fatalf("rank %d: %d threads at priority 2, want the heartbeat thread alone", r, top)
			}
		}
	}
	j.kill(2)
	gone := map[uint32]bool{2: true}
	j.waitComplete(n, gone, 30*time.Second) // accuracy checked all along
	time.Sleep(500 * time.Millisecond)
	j.checkAccuracy(gone)
	j.job.Stop(5 * time.Second) // the survivors leave: their departures are not suspicions
	<-j.done
	stats := 0
	for _, l := range j.lines {
		if l.Ev == "stats" {
			stats++
			if l.ProcessRT != (os.Geteuid() == 0) {
				t.Errorf("rank %d: process real-time %v as uid %d", l.Rank, l.ProcessRT, os.Geteuid())
			}
		}
	}
	if stats != n-1 {
		t.Fatalf("%d stats lines, want %d", stats, n-1)
	}
}

// TestE2EBadInvocationsGiveClearErrors: a bad invocation (unknown command
// or flag, a bad or inconsistent value) exits 2 naming the flag and value;
// a failure at run time (here: no launcher) exits 1.
func TestE2EBadInvocationsGiveClearErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  []string
		want string
		code int
	}{
		{[]string{"agent"}, nil, "vigil run", 1},
		{[]string{"run", "-n", "0"}, nil, "-n 0", 2},
		{[]string{"run", "-n", "4", "-h", "50ms", "-delta", "10ms"}, nil, "-delta", 2},
		{[]string{"run", "-n", "4", "-broadcast", "flood"}, nil, "-broadcast \"flood\"", 2},
		{[]string{"run", "-n", "4", "-transport", "carrier-pigeon"}, nil, "-transport", 2},
		{[]string{"run", "-n", "4", "-emitter", "rust"}, nil, "-emitter \"rust\"", 2},
		{[]string{"frobnicate"}, nil, "unknown command", 2},
		{[]string{"bench", "quick"}, nil, "vigil-bench quick|full", 2},
		{[]string{"sim", "all"}, nil, "vigil-bench sim", 2},
		{[]string{"run", "-n", "2", "-h", "10"}, nil, "with a unit", 2},
		{[]string{"run", "-n", "2000000000"}, nil, "mpirun", 2},
		{[]string{"run", "-n", "2", "-h", "1ns", "-delta", "2ns"}, nil, "-h 1ns: want 10µs to 1m0s", 2},
		{[]string{"run", "-n", "2", "-h", "-1s"}, nil, "-h -1s: want 10µs to 1m0s", 2},
		{[]string{"run", "-n", "2", "-h", "10ms", "-delta", "15ms"}, nil, "-delta 15ms: want ≥ 2 × -h = 20ms", 2},
		{[]string{"run", "-n", "2", "-h", "20us"}, nil, "-h 20µs: want ≥ 50µs with a real-time heartbeat thread (or -realtime off)", 2},
		{[]string{"run", "-n", "2", "-check", "1s"}, nil, "-check 1s: want ≤ -delta = 50ms", 2},
		{[]string{"run", "-n", "2", "-grace", "-1s"}, nil, "-grace -1s", 2},
		{[]string{"run", "-n", "2", "-t", "-1s"}, nil, "-t -1s: want ≥ 0s", 2},
		{[]string{"run", "-n", "2", "-ranks-per-host", "-1"}, nil, "-ranks-per-host -1", 2},
		{[]string{"agent", "-h", "1ns"}, nil, "-h 1ns", 2},
		{[]string{"daemon", "-h", "1ns", "-delta", "2ns"}, nil, "-h 1ns", 2},
		{[]string{"daemon", "-peers", "127.0.0.1:1,127.0.0.1:2", "-node", "5"}, nil, "-node 5", 2},
		{[]string{"daemon", "-ppn", "-1"}, nil, "-ppn -1", 2},
		{[]string{"run", "-n", "2", "-h", "10ms", "-delta", "5ms"}, nil, "-delta 5ms", 2},
		{[]string{"run", "-n", "2", "-pin", "9999"}, nil, "-pin 9999", 2},
		{[]string{"run", "-no-such-flag"}, nil, "-no-such-flag", 2},
		{[]string{"run", "-n", "2", "-log-level", "loud"}, nil, "-log-level \"loud\"", 2},
		{[]string{"agent", "-metrics-addr", "9464"}, nil, "-metrics-addr \"9464\"", 2},
		{[]string{"run", "-n", "2", "-metrics-addr", "127.0.0.1:9464"}, nil, "give port 0", 2},
		{[]string{"demo", "-ranks-per-host", "9"}, nil, "-ranks-per-host 9", 2},
		{[]string{"run", "-n", "3", "./myprog"}, nil, "put it after --, as in: vigil run -n 3 -- ./myprog", 2},
		{[]string{"run", "-n", "3", "--"}, nil, "nothing after --", 2},
		{[]string{"run", "-n", "2", "-delta", "1s", "-transport", "tcp", "--", "true"}, nil, "-delta, -transport configure vigil's own agents", 2},
		{[]string{"run", "-n", "2", "-t", "-1s", "--", "true"}, nil, "-t -1s", 2},
		{[]string{"run", "-n", "2", "--", "./no-such-program"}, nil, "no-such-program", 1},
		{[]string{"agent", "-stats-every", "-1s"}, nil, "-stats-every -1s", 2},
		{[]string{"agent", "-agree-loop", "-3"}, nil, "-agree-loop -3", 2},
		{[]string{"daemon", "-log-level", "chatty"}, nil, "-log-level \"chatty\"", 2},
		{[]string{"daemon", "-transport", "smoke"}, nil, "-transport \"smoke\"", 2},
	} {
		cmd := exec.Command(vigilBin, tc.args...)
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("vigil %v: exit %d (%v), output %q; want exit %d mentioning %q", tc.args, code, err, out, tc.code, tc.want)
		}
	}
}

// TestE2EHelpAndVersion: a bare -h (the heartbeat period's flag), -help
// and --help print a command's flags and succeed; -version names the build.
func TestE2EHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"run", "-h"}, {"agent", "-help"}, {"daemon", "--help"}, {"demo", "-n", "3", "-h"}} {
		out, err := exec.Command(vigilBin, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "-delta") {
			t.Errorf("vigil %v: err %v, output %q; want the flags and success", args, err, out)
		}
	}
	k1, err1 := exec.Command(vigilBin, "keygen").Output()
	k2, err2 := exec.Command(vigilBin, "keygen").Output()
	if err1 != nil || err2 != nil || len(k1) != 65 || string(k1) == string(k2) {
		t.Errorf("vigil keygen: %q %v, %q %v; want two different 64-digit keys", k1, err1, k2, err2)
	}
	for _, v := range []string{"-version", "--version", "version"} {
		out, err := exec.Command(vigilBin, v).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "vigil ") || !strings.Contains(string(out), "go1.") {
			t.Errorf("vigil %s: err %v, output %q", v, err, out)
		}
	}
}

// TestE2EStatsWhileRunning: an agent prints its counters while it runs,
// every -stats-every and at SIGUSR1, without leaving the job.
func TestE2EStatsWhileRunning(t *testing.T) {
	j := startJob(t, 3, "-h", "10ms", "-delta", "100ms", "-stats-every", "300ms")
	if err := j.job.Signal(1, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		j.mu.Lock()
		n := map[uint32]int{}
		var last launch.Line
		for _, l := range j.lines {
			if l.Ev == "stats" {
				n[l.Rank]++
				last = l
			}
			if l.Ev == "dead" || l.Ev == "bye" {
				j.mu.Unlock()
				t.Fatalf("unexpected %+v while running", l)
			}
		}
		j.mu.Unlock()
		if n[0] >= 2 && n[1] >= 3 && n[2] >= 2 {
			if last.HeartbeatsSent == 0 || last.LoopWakes == 0 {
				t.Fatalf("stats line without counters: %+v", last)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats lines per rank %v after 10 s, want ≥ 2 each (rank 1: ≥ 3 with SIGUSR1)", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// After a crash, the survivors' stats lines count it: learned by both,
	// reported by its observer alone, and the broadcast of it by kind.
	j.kill(2)
	j.waitComplete(3, map[uint32]bool{2: true}, 10*time.Second)
	deadline = time.Now().Add(10 * time.Second)
	j.mu.Lock()
	from := len(j.lines)
	j.mu.Unlock()
	for {
		j.mu.Lock()
		var learned, reported, bcastSent, bcastRecv uint64
		seen := map[uint32]bool{}
		for _, l := range j.lines[from:] {
			if l.Ev == "stats" && !seen[l.Rank] {
				seen[l.Rank] = true
				learned += l.DeathsLearned
				reported += l.Reported
				bcastSent += l.ByKind["bcast"].Sent
				bcastRecv += l.ByKind["bcast"].Recv
				if l.BytesSent == 0 || l.ByKind["bcast"].BytesSent+l.ByKind["bcast"].BytesRecv == 0 {
					t.Errorf("rank %d: stats line without message bytes: %+v", l.Rank, l)
				}
			}
		}
		j.mu.Unlock()
		if len(seen) == 2 {
			if learned != 2 || reported != 1 {
				t.Fatalf("after the crash of rank 2: deaths learned %d, reported %d in the survivors' stats lines; want 2 and 1", learned, reported)
			}
			if bcastSent == 0 || bcastRecv == 0 {
				t.Fatalf("after the crash of rank 2: broadcast messages %d sent, %d received in the survivors' stats lines", bcastSent, bcastRecv)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stats line from both survivors after the crash")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// threads lists pid's thread ids from /proc.
func threads(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		if t, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, t)
		}
	}
	return tids, nil
}
