package hb_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vigil-hpc/vigil/hb"
)

// policies returns the scheduling policy (field 41 of /proc/<tid>/stat) of
// every thread of this process.
func policies(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/stat")
		if err != nil {
			continue // exited
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		out[e.Name()] = f[38] // field 41 overall; f[0] is field 3
	}
	return out
}

// TestSetProcessFIFO runs in a child process (the whole process becomes
// real-time): every thread, and threads the runtime starts afterwards, run
// SCHED_FIFO; without privilege nothing changes and the error says so.
func TestSetProcessFIFO(t *testing.T) {
	if os.Getenv("VIGIL_FIFO_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSetProcessFIFO$", "-test.v")
		cmd.Env = append(os.Environ(), "VIGIL_FIFO_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		if !strings.Contains(string(out), "--- PASS: TestSetProcessFIFO") {
			t.Fatal("the child did not pass")
		}
		return
	}
	if _, err := hb.SetProcessFIFO(0); err == nil {
		t.Fatal("priority 0 accepted")
	}
	before := policies(t)
	n, err := hb.SetProcessFIFO(1)
	if errors.Is(err, unix.EPERM) {
		if after := policies(t); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("refused, yet policies changed: %v → %v", before, after)
		}
		t.Logf("not permitted here (%v): checked that nothing changed", err)
		return
	}
	if err != nil || n == 0 {
		t.Fatalf("SetProcessFIFO: %d threads, %v", n, err)
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
		if pol != "1" {
			t.Errorf("thread %s: policy %s, want 1 (SCHED_FIFO)", tid, pol)
		}
	}
}
