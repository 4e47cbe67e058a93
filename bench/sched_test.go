package bench

import (
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseSchedstat(t *testing.T) {
	s, err := ParseSchedstat("123 45 6\n")
	if err != nil || s != (Schedstat{123, 45, 6}) {
		t.Fatalf("ParseSchedstat = %+v, %v", s, err)
	}
	for _, bad := range []string{"", "1 2", "1 2 x", "1 2 3 4", "-1 2 3"} {
		if _, err := ParseSchedstat(bad); err == nil {
			t.Errorf("ParseSchedstat(%q) accepted", bad)
		}
	}
}

func TestParseFieldOffset(t *testing.T) {
	f := "name: sched_switch\nformat:\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n" +
		"\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
	for field, want := range map[string]int16{"prev_pid": 24, "prev_state": 32} {
		if got, err := parseFieldOffset(f, field); err != nil || got != want {
			t.Errorf("%s: %d, %v", field, got, err)
		}
	}
	if _, err := parseFieldOffset(f, "next_pid"); err == nil {
		t.Error("missing field found")
	}
}

// TestSchedWatch watches this test process: one spinning thread is the
// "application", a thread that sleeps 1 ms in a loop plays the emitter.
// On a kernel that allows BPF the eBPF path must report the emitter's
// run-queue wake-ups; otherwise the schedstat fallback must say why.
func TestSchedWatch(t *testing.T) {
	var stop atomic.Bool
	tidc := make(chan int, 1)
	go func() {
		runtime.LockOSThread()
		tidc <- unixGettid()
		for !stop.Load() {
			time.Sleep(time.Millisecond)
		}
	}()
	tid := <-tidc
	w, err := WatchSched([]int{os.Getpid()}, nil, [2]int{os.Getpid(), tid})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(300 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	a := w.Stop() // before the emitter's goroutine returns: its locked thread then exits
	stop.Store(true)
	t.Logf("%+v", a)
	if a.AppCPU == 0 {
		t.Errorf("no application CPU time seen: %+v", a)
	}
	switch a.Source {
	case "ebpf":
		if a.EmitterRunq.Total() == 0 || a.EmitterCPU == 0 || a.Why != "" {
			t.Errorf("eBPF saw no emitter wake-up: %+v", a)
		}
	case "schedstat":
		if a.Why == "" {
			t.Error("fallback without a reason")
		}
		if os.Geteuid() == 0 {
			t.Logf("running as root but BPF unavailable: %s", a.Why)
		}
	default:
		t.Errorf("source %q", a.Source)
	}
}
