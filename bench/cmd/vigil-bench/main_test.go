package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/bench"
)

// The tests below run the built vigil-bench binary, as the harness starts
// its children.

var benchBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vigil-bench-test-")
	if err != nil {
		panic(err)
	}
	benchBin = filepath.Join(dir, "vigil-bench")
	out, err := exec.Command("go", "build", "-o", benchBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building vigil-bench: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestBenchChildEmitter runs the lateness part's Go loop for a moment
// with an allocating goroutine beside it and parses its line (the harness,
// not the machine's speed).
func TestBenchChildEmitter(t *testing.T) {
	out, err := exec.Command(benchBin, "child", "emitter", "-h", "1ms", "-d", "300ms", "-garbage", "64").Output()
	if err != nil {
		t.Fatalf("vigil-bench child emitter: %v", err)
	}
	r, err := bench.ParseLateness(string(out))
	if err != nil {
		t.Fatal(err)
	}
	// 300 periods, the first heartbeat at once and the observer's kick.
	if r.Wakeups == 0 || r.Wakeups > 310 || r.Missed > r.Wakeups || r.GCs == 0 {
		t.Fatalf("300 ms at h = 1 ms, allocating 64 MB/s: %+v", r)
	}
}

func TestBadInvocationsGiveClearErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rtprocess", "-guard-hs", "5x"}, "-guard-hs"},
		{[]string{"rtprocess", "-guard-rounds", "-1"}, "-guard-rounds"},
		{[]string{"nosuchpart"}, "unknown name"},
		{[]string{"child", "emitter", "-h", "0"}, "-h > 0"},
		{[]string{"child", "teleporter"}, "want vigil, memberlist or emitter"},
		{[]string{"sim"}, "missing subcommand"},
	} {
		out, err := exec.Command(benchBin, tc.args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("vigil-bench %v: err %v, output %q; want a failure mentioning %q", tc.args, err, out, tc.want)
		}
	}
}
