package bench

import (
	"context"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestParseLateness(t *testing.T) {
	r, err := ParseLateness("noise before\nlateness wakeups=100 missed=3 max_ns=2500000 fifo=1 gcs=7\n")
	if err != nil {
		t.Fatal(err)
	}
	want := LatenessResult{Wakeups: 100, Missed: 3, MaxLate: 2500 * time.Microsecond, FIFO: true, GCs: 7}
	if r != want {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	if r, err := ParseLateness("lateness wakeups=5 missed=0 max_ns=10 fifo=0"); err != nil || r.FIFO || r.GCs != 0 {
		t.Fatalf("C line: %+v, %v", r, err)
	}
	for _, bad := range []string{
		"",
		"latency wakeups=1 missed=0 max_ns=1 fifo=1",
		"lateness wakeups=1 missed=0 max_ns=1",                // fifo missing
		"lateness wakeups=1 missed=0 max_ns=1 fifo=1 fifo=0",  // twice
		"lateness wakeups=1 missed=0 max_ns=1 fifo=1 color=2", // unknown
		"lateness wakeups=x missed=0 max_ns=1 fifo=1",         // not a number
		"lateness wakeups=-1 missed=0 max_ns=1 fifo=1",        // negative
		"lateness wakeups=1 missed=2 max_ns=1 fifo=1",         // more missed than wake-ups
		"lateness wakeups=1 missed=0 max_ns=1 fifo=2",
		"lateness wakeups=1 missed=0 max_ns fifo=1", // no value
	} {
		if _, err := ParseLateness(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseSteal(t *testing.T) {
	d, err := parseSteal("cpu  1540774 12193 502959 1387040 6354 0 57768 1678 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if err != nil || d != 16780*time.Millisecond {
		t.Fatalf("steal %v, %v", d, err)
	}
	for _, bad := range []string{"", "cpu 1 2 3", "intr 1 2 3 4 5 6 7 8 9", "cpu 1 2 3 4 5 6 7 x 9"} {
		if _, err := parseSteal(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := StealTime(); err != nil {
		t.Fatalf("this machine's /proc/stat: %v", err)
	}
}

// TestSummarizeLateness: medians over rounds per load, h and variant, the
// worst of all rounds, the ratio to the C loop, GCs and steal summed.
func TestSummarizeLateness(t *testing.T) {
	ms := time.Millisecond
	row := func(load string, round int, v string, wake, missed uint64, late time.Duration, gcs uint64, steal time.Duration) LatenessRow {
		return LatenessRow{Load: load, H: ms, Round: round, Variant: v, Steal: steal,
			LatenessResult: LatenessResult{Wakeups: wake, Missed: missed, MaxLate: late, FIFO: true, GCs: gcs}}
	}
	rows := []LatenessRow{
		row(Compute, 0, LatGo, 1000, 4, 6*ms, 0, 0),
		row(Compute, 0, LatC, 1000, 1, 2*ms, 0, 10*ms),
		row(Compute, 1, LatC, 1000, 3, 4*ms, 0, 0),
		row(Compute, 1, LatGo, 1000, 2, 10*ms, 0, 0),
		row(Compute, 2, LatC, 1000, 2, 3*ms, 0, 0),
		row(Compute, 2, LatGo, 500, 5, 9*ms, 0, 0),
		row(Idle, 0, LatGoAlloc, 1000, 0, ms, 30, -1),
	}
	rows[5].FIFO = false
	got := SummarizeLateness(rows)
	if len(got) != 3 {
		t.Fatalf("%d groups: %+v", len(got), got)
	}
	c, g, a := got[0], got[1], got[2]
	if c.Variant != LatC || c.Rounds != 3 || c.MissedPerK != 2 || c.MedianMax != 3*ms || c.WorstMax != 4*ms || c.MaxOverC != 1 ||
		c.Steal != 10*ms || !c.FIFO {
		t.Errorf("C loop: %+v", c)
	}
	// Go: missed per 1,000 = 4, 2, 10 → median 4; worst 6, 10, 9 → median 9.
	if g.Variant != LatGo || g.MissedPerK != 4 || g.MedianMax != 9*ms || g.WorstMax != 10*ms || g.MaxOverC != 3 || g.FIFO {
		t.Errorf("Go emitter: %+v", g)
	}
	if a.Load != Idle || a.GCs != 30 || a.Steal >= 0 || !math.IsNaN(a.MaxOverC) {
		t.Errorf("idle group without a C run: %+v", a)
	}
}

// TestLatenessCLoop builds and runs the C loop for a moment: the harness
// (build, command line, parsing), not the machine's speed.
func TestLatenessCLoop(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc): scripts/deps.sh test installs gcc")
	}
	bin, err := BuildLateness(context.Background(), "..", t.TempDir()) // tests run in bench/
	if err != nil {
		t.Fatal(err)
	}
	cfg := LatenessConfig{CBin: bin, Duration: 200 * time.Millisecond}
	r, err := runLateness(context.Background(), cfg, LatC, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.Wakeups == 0 || r.Wakeups > 200 || r.Missed > r.Wakeups || r.MaxLate < 0 || r.GCs != 0 {
		t.Fatalf("200 ms at h = 1 ms: %+v", r)
	}
	out, err := exec.Command(bin, "0", "100", "0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "must be positive") {
		t.Fatalf("h = 0: %v, %q", err, out)
	}
	if _, err := Lateness(context.Background(), LatenessConfig{CBin: bin, Hs: []time.Duration{time.Millisecond},
		Duration: time.Millisecond, Rounds: 1, Loads: []string{"earthquake"}}); err == nil || !strings.Contains(err.Error(), "earthquake") {
		t.Fatalf("unknown load: %v", err)
	}
}
