package heartbeat_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/heartbeat"
)

// policies returns the scheduling policy of every thread of this process.
func policies(t *testing.T) map[int]int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if policy, _, err := heartbeat.ThreadSched(os.Getpid(), tid); err == nil { // else it exited
			out[tid] = policy
		}
	}
	return out
}

// TestSetProcessRealTime runs in a child process (the whole process becomes
// real-time): every thread, and threads the runtime starts afterwards, run
// SCHED_RR; without privilege nothing changes and the error says so.
func TestSetProcessRealTime(t *testing.T) {
	if os.Getenv("VIGIL_RT_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSetProcessRealTime$", "-test.v")
		cmd.Env = append(os.Environ(), "VIGIL_RT_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		if !strings.Contains(string(out), "--- PASS: TestSetProcessRealTime") {
			t.Fatal("the child did not pass")
		}
		return
	}
	if _, err := heartbeat.SetProcessRealTime(0); err == nil {
		t.Fatal("priority 0 accepted")
	}
	before := policies(t)
	n, err := heartbeat.SetProcessRealTime(1)
	if errors.Is(err, unix.EPERM) {
		if after := policies(t); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("refused, yet policies changed: %v → %v", before, after)
		}
		t.Logf("not permitted here (%v): checked that nothing changed", err)
		return
	}
	if err != nil || n == 0 {
		t.Fatalf("SetProcessRealTime: %d threads, %v", n, err)
	}
	// Make the runtime start more threads: goroutines locked to their own.
	var wg sync.WaitGroup
	release := make(chan struct{})
	var ready sync.WaitGroup
	for range 4 {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			ready.Done()
			<-release
		}()
	}
	ready.Wait()
	after := policies(t)
	close(release)
	wg.Wait()
	if len(after) <= n {
		t.Fatalf("no new thread started (%d before, %d now)", n, len(after))
	}
	for tid, pol := range after {
		if pol != 2 {
			t.Errorf("thread %d: policy %d, want 2 (SCHED_RR)", tid, pol)
		}
	}
}

func TestThreadSched(t *testing.T) {
	// This test process's main thread runs under the normal policy.
	if policy, priority, err := heartbeat.ThreadSched(os.Getpid(), os.Getpid()); err != nil || policy != 0 || priority != 0 {
		t.Fatalf("main thread: policy %d priority %d, %v", policy, priority, err)
	}
	if _, _, err := heartbeat.ThreadSched(os.Getpid(), -1); err == nil {
		t.Fatal("a thread that does not exist was read")
	}
}
