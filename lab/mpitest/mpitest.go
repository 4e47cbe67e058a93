// Package mpitest runs programs under Open MPI's mpirun for tests: it
// starts the job in its own process group (killed when the test ends),
// collects the ranks' tagged output lines, finds each rank's PID and
// terminates the job, on this host or (Hosts) across hosts simulated with
// network namespaces. Tests skip, saying why, when mpirun is not installed
// (or, for Hosts, without root or ip netns; with VIGIL_REQUIRE_HOSTS=1
// those fail instead).
package mpitest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Flags are the mpirun options for Debian's Open MPI 4.1 that the tests use:
// run as root, more ranks than cores, no core binding, tagged output lines
// ("[job,rank]<stdout>:text"), and — the one that matters — keep the job
// running when a rank dies: by default mpirun aborts the whole job as soon
// as one process exits on a signal or with a non-zero status.
// `--enable-recovery` also keeps the survivors running, but mpirun then
// prints a PMIx BAD-PARAM error at exit.
var Flags = []string{
	"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "--tag-output",
	"--mca", "orte_abort_on_non_zero_status", "0",
}

// Need returns mpirun's path, or skips the test when it is not installed.
func Need(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skipf("mpirun is not installed (%v); install openmpi-bin and libpmix-dev to run this test", err)
	}
	return p
}

// Line is one line a rank printed on its standard output.
type Line struct {
	Rank int
	Text string
}

// Job is a running mpirun.
type Job struct {
	t      testing.TB
	Cmd    *exec.Cmd
	lines  chan Line
	exited chan struct{}
	mu     sync.Mutex
	stderr bytes.Buffer
}

// Start runs `mpirun Flags [extra...] -n n argv...` with env added to its
// environment (mpirun passes its environment to the ranks on this host; use
// "-x NAME" in extra for other hosts).
func Start(t testing.TB, n int, env, extra []string, argv ...string) *Job {
	t.Helper()
	mpirun := Need(t)
	args := append(append(append(slices.Clone(Flags), extra...), "-n", strconv.Itoa(n)), argv...)
	j := &Job{t: t, Cmd: exec.Command(mpirun, args...), lines: make(chan Line, 4096), exited: make(chan struct{})}
	j.Cmd.Env = append(os.Environ(), env...)
	j.Cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.stderr.Write(b)
	})
	j.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := j.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", mpirun, err)
	}
	t.Logf("started mpirun %s", strings.Join(args, " "))
	pgid := j.Cmd.Process.Pid
	t.Cleanup(func() {
		// mpirun puts each rank in a process group of its own: a rank that
		// outlived SIGKILL of mpirun's group would be orphaned and run on
		// (a daemon job did). Its ranks are found before mpirun dies.
		ranks := j.RankPIDs()
		syscall.Kill(-pgid, syscall.SIGKILL) // the job's own process group
		for _, pid := range ranks {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		<-j.exited
	})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			if l, ok := ParseTagged(sc.Text()); ok {
				j.lines <- l
			}
		}
		j.Cmd.Wait()
		close(j.lines)
		close(j.exited)
	}()
	return j
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

var _ io.Writer = writerFunc(nil)

// ParseTagged splits a --tag-output line "[1,3]<stdout>:text".
func ParseTagged(s string) (Line, bool) {
	tag, text, ok := strings.Cut(s, "]<stdout>:")
	if !ok || !strings.HasPrefix(tag, "[") {
		return Line{}, false
	}
	_, rs, ok := strings.Cut(tag, ",")
	r, err := strconv.Atoi(rs)
	if !ok || err != nil {
		return Line{}, false
	}
	return Line{Rank: r, Text: text}, true
}

// Lines returns the channel of output lines; it is closed when mpirun has
// exited.
func (j *Job) Lines() <-chan Line { return j.lines }

// Exited is closed when mpirun has exited.
func (j *Job) Exited() <-chan struct{} { return j.exited }

// Next returns the next line, failing the test at the deadline or if mpirun
// exits first.
func (j *Job) Next(deadline <-chan time.Time, what string) Line {
	j.t.Helper()
	select {
	case l, ok := <-j.lines:
		if !ok {
			j.t.Fatalf("mpirun exited while waiting for %s: %v\nstderr:\n%s", what, j.Cmd.ProcessState, j.Stderr())
		}
		return l
	case <-deadline:
		j.t.Fatalf("timed out waiting for %s\nstderr:\n%s", what, j.Stderr())
	}
	panic("unreachable")
}

// Stderr returns what mpirun and the ranks wrote to standard error so far.
func (j *Job) Stderr() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stderr.String()
}

// RankPIDs returns the PIDs of mpirun's children by their PMIX_RANK.
func (j *Job) RankPIDs() map[int]int {
	out := map[int]int{}
	for pid, pp := range Parents() {
		if pp != j.Cmd.Process.Pid {
			continue
		}
		if r, ok := pmixRank(pid); ok {
			out[r] = pid
		}
	}
	return out
}

// WaitPIDs waits up to timeout for n ranks' PIDs.
func (j *Job) WaitPIDs(n int, timeout time.Duration) map[int]int {
	j.t.Helper()
	end := time.Now().Add(timeout)
	for {
		pids := j.RankPIDs()
		if len(pids) == n {
			return pids
		}
		if time.Now().After(end) {
			j.t.Fatalf("found the PIDs of %d ranks of %d (%v)", len(pids), n, pids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Terminate sends SIGTERM to mpirun, which forwards it to the ranks, and
// reports whether mpirun exited within grace.
func (j *Job) Terminate(grace time.Duration) bool {
	j.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-j.exited:
		return true
	case <-time.After(grace):
		return false
	}
}

// pmixRank returns the PMIX_RANK in the environment of process pid.
func pmixRank(pid int) (int, bool) {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return 0, false
	}
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("PMIX_RANK=")); ok {
			if r, err := strconv.Atoi(string(v)); err == nil {
				return r, true
			}
		}
	}
	return 0, false
}
