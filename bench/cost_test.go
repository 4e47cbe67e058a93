package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/launch"
)

func TestParseCtxSwitches(t *testing.T) {
	status := "Name:\tvigil\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n"
	v, i, err := ParseCtxSwitches(status)
	if err != nil || v != 1234 || i != 56 {
		t.Fatalf("got %d, %d, %v", v, i, err)
	}
	for _, bad := range []string{
		"",
		"voluntary_ctxt_switches:\t1\n",    // involuntary missing
		"nonvoluntary_ctxt_switches:\t1\n", // voluntary missing
		"voluntary_ctxt_switches:\tx\nnonvoluntary_ctxt_switches:\t1\n",
		"voluntary_ctxt_switches:\t-1\nnonvoluntary_ctxt_switches:\t1\n",
		"voluntary_ctxt_switches:\t1\nvoluntary_ctxt_switches:\t2\nnonvoluntary_ctxt_switches:\t1\n",
	} {
		if _, _, err := ParseCtxSwitches(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestProcCostSince: a thread present at both reads counts its
// difference, a new thread counts whole, an exited one nothing; the
// chosen thread's share is reported alone.
func TestProcCostSince(t *testing.T) {
	before := ProcCost{Threads: map[int]ThreadCost{1: {100, 10}, 2: {500, 3}, 3: {40, 1}}}
	after := ProcCost{Threads: map[int]ThreadCost{1: {150, 12}, 2: {900, 4}, 4: {7, 2}}}
	cpu, em, ctxs := after.Since(before, 2)
	if cpu != 50+400+7 || em != 400 || ctxs != 2+1+2 {
		t.Fatalf("cpu %v, emitter %v, ctx switches %d", cpu, em, ctxs)
	}
	if _, em, _ := after.Since(before, 3); em != 0 {
		t.Errorf("exited thread: %v", em)
	}
	// A counter read lower than before (out of order) counts 0, not a wrap.
	if cpu, _, ctxs := before.Since(after, 0); cpu != 40 || ctxs != 1 {
		t.Errorf("reversed: cpu %v, ctx switches %d", cpu, ctxs)
	}
}

// TestReadProcCost reads this process: CPU burnt on a locked thread
// between two reads is seen, in the total and on that thread.
func TestReadProcCost(t *testing.T) {
	tids := make(chan int)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tids <- syscall.Gettid()
		<-tids
		for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
		}
		close(done)
		<-tids
	}()
	tid := <-tids
	before, err := ReadProcCost(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := before.Threads[tid]; !ok {
		t.Fatalf("thread %d not among %v", tid, before.Threads)
	}
	tids <- 0
	<-done
	after, err := ReadProcCost(os.Getpid())
	tids <- 0
	if err != nil {
		t.Fatal(err)
	}
	cpu, em, _ := after.Since(before, tid)
	if em <= 0 || cpu < em || !after.At.After(before.At) {
		t.Fatalf("after burning 30 ms on thread %d: process %v, thread %v", tid, cpu, em)
	}
	if _, err := ReadProcCost(-1); err == nil {
		t.Error("pid -1 accepted")
	}
}

func TestParseMachineCPU(t *testing.T) {
	m, err := ParseMachineCPU("cpu  100 20 30 1000 7 2 1 5 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\ncpu1 1 2 3 4 5 6 7 8 9 10\nintr 5\n")
	if err != nil || m.Idle != 10070*time.Millisecond || m.Steal != 50*time.Millisecond || m.CPUs != 2 {
		t.Fatalf("%+v, %v", m, err)
	}
	later := MachineCPU{Idle: m.Idle + 1500*time.Millisecond, Steal: m.Steal + 100*time.Millisecond, CPUs: 2}
	if b := later.Busy(m, time.Second); b != 400*time.Millisecond {
		t.Errorf("busy %v over 1 s on 2 CPUs with 1.5 s idle and 0.1 s stolen", b)
	}
	for _, bad := range []string{"", "cpu 1 2 3", "intr 1 2 3 4 5 6 7 8 9", "cpu 1 2 3 4 5 6 7 x 9\ncpu0 1", "cpu 1 2 3 4 5 6 7 -8 9\ncpu0 1",
		"cpu 68719476736 0 0 0 0 0 0 0\ncpu0 1", "cpu 1 2 3 4 5 6 7 8\n", "cpu 1 2 3 4 5 6 7 8\ncpux 1\n"} {
		if _, err := ParseMachineCPU(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	a, err := ReadMachineCPU()
	if err != nil {
		t.Fatalf("this machine's /proc/stat: %v", err)
	}
	if a.CPUs < 1 || a.CPUs > 4096 {
		t.Errorf("%d CPUs", a.CPUs)
	}
}

func TestParseHBCost(t *testing.T) {
	r, err := ParseHBCost("hbcost rank 0: SUSPECT\nhbcost sent=2000 checks=200 received=1990 suspicions=1 missed=3 max_late_ns=2500000\n")
	if err != nil {
		t.Fatal(err)
	}
	want := HBCostResult{Sent: 2000, Checks: 200, Received: 1990, Suspicions: 1, Missed: 3, MaxLate: 2500 * time.Microsecond}
	if r != want {
		t.Fatalf("got %+v, want %+v", r, want)
	}
	for _, bad := range []string{
		"",
		"hbcost sent=1 checks=1 received=1 suspicions=0 missed=0",                         // max_late_ns missing
		"hbcost sent=1 checks=1 received=1 suspicions=0 missed=0 max_late_ns=1 sent=2",    // twice
		"hbcost sent=1 checks=1 received=1 suspicions=0 missed=0 max_late_ns=1 color=2",   // unknown
		"hbcost sent=x checks=1 received=1 suspicions=0 missed=0 max_late_ns=1",           // not a number
		"hbcost sent=1 checks=1 received=1 suspicions=2 missed=0 max_late_ns=1",           // more suspicions than checks
		"lateness sent=1 checks=1 received=1 suspicions=0 missed=0 max_late_ns=1",         // another program
		"hbcost sent=1 checks=1 received=1 suspicions=0 missed=0 max_late_ns=-1",          // negative
		"hbcost sent=1 checks=1 received=1 suspicions=0 missed=0 max_late_ns",             // no value
		"hbcost sent=1 checks=1 received=1 suspicions=0 missed=0 max_late_ns=1\nhbcost x", // not the last line
	} {
		if _, err := ParseHBCost(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestHBCostFrameSize: the C reference's datagram is the size of Vigil's
// heartbeat frame.
func TestHBCostFrameSize(t *testing.T) {
	src, err := os.ReadFile("csrc/hbcost.c")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#define HB_FRAME_SIZE (\d+)$`).FindSubmatch(src)
	if m == nil || string(m[1]) != fmt.Sprint(wire.HeartbeatFrameSize) {
		t.Fatalf("hbcost.c HB_FRAME_SIZE %q, want %d (wire.HeartbeatFrameSize)", m, wire.HeartbeatFrameSize)
	}
}

func TestCostWindow(t *testing.T) {
	ms := time.Millisecond
	c := CostConfig{Periods: 200, Window: 2 * time.Second, MaxWindow: 10 * time.Second}
	for _, tc := range []struct{ h, want time.Duration }{
		{ms, 2 * time.Second}, {20 * ms, 4 * time.Second}, {time.Second, 10 * time.Second},
	} {
		if got := c.window(tc.h); got != tc.want {
			t.Errorf("h = %v: window %v, want %v", tc.h, got, tc.want)
		}
	}
	c.MaxWindow = time.Second // shorter than Window: Window wins
	if got := c.window(time.Second); got != 2*time.Second {
		t.Errorf("MaxWindow < Window: %v", got)
	}
	if d, chk := CostTimes(ms); d != 100*ms || chk != 10*ms {
		t.Errorf("h = 1ms: δ %v, check %v", d, chk)
	}
	if d, chk := CostTimes(time.Second); d != 10*time.Second || chk != time.Second {
		t.Errorf("h = 1s: δ %v, check %v", d, chk)
	}
}

// TestSummarizeCost: medians over processes and rounds per side, the
// emitter/rest split, and the ratio as the median of per-round ratios.
func TestSummarizeCost(t *testing.T) {
	ms := time.Millisecond
	s := time.Second
	// At h = 1 ms a 1 s window is 1,000 periods: CPU in ms = µs/period.
	run := func(side string, round int, cpus ...time.Duration) CostRun {
		r := CostRun{Transport: CostUDP, H: ms, N: len(cpus), Side: side, Round: round}
		if side == CostVigil {
			r.Heartbeat = CostUDP
		}
		for i, c := range cpus {
			em := c
			if side == CostVigil {
				em = c / 4
			}
			r.Samples = append(r.Samples, CostSample{Rank: i, Window: s, CPU: c, Emitter: em, CtxSwitches: 2000})
		}
		return r
	}
	runs := []CostRun{
		run(CostC, 0, 20*ms, 22*ms),
		run(CostVigil, 0, 100*ms, 120*ms), // ratio 110/21
		run(CostVigil, 1, 60*ms, 60*ms),
		run(CostC, 1, 30*ms, 30*ms), // ratio 2
		run(CostC, 2, 20*ms, 20*ms),
		run(CostVigil, 2, 80*ms, 80*ms), // ratio 4
	}
	runs[1].Suspicions, runs[1].AtStop, runs[3].Lost = 2, 3, 1
	runs[0].Background, runs[3].Background, runs[4].Background = 0.1, math.NaN(), 0.5 // C: median of 0.1 and 0.5
	runs = append(runs, CostRun{Transport: CostSHM, H: ms, N: 2, Side: CostC, Round: 0,
		Samples: []CostSample{{Window: s, CPU: 10 * ms, Emitter: 10 * ms}}})
	got := SummarizeCost(runs)
	if len(got) != 3 {
		t.Fatalf("%d groups: %+v", len(got), got)
	}
	c, v, m := got[0], got[1], got[2]
	// C: 20, 22, 30, 30, 20, 20 → median 21; Vigil: 100, 120, 60, 60, 80, 80 → 80.
	if c.Side != CostC || c.Transport != CostUDP || c.Rounds != 3 || c.Samples != 6 || c.USPerPeriod != 21 ||
		c.EmitterUS != 21 || c.RestUS != 0 || c.CtxPerPeriod != 2 || math.Abs(c.Core-0.021) > 1e-9 || c.Lost != 1 ||
		c.Ratio != 1 || c.RatioMin != 1 || c.RatioMax != 1 {
		t.Errorf("C: %+v", c)
	}
	// Vigil: emitter a quarter, the rest three quarters; per-round ratios
	// 110/21, 2 and 4.
	if v.Side != CostVigil || v.Heartbeat != CostUDP || v.USPerPeriod != 80 || v.EmitterUS != 20 || v.RestUS != 60 ||
		v.Suspicions != 2 || v.Ratio != 4 || v.RatioMin != 2 || math.Abs(v.RatioMax-110.0/21) > 1e-9 {
		t.Errorf("Vigil: %+v", v)
	}
	if m.Transport != CostSHM || m.Side != CostC || m.USPerPeriod != 10 || m.Ratio != 1 {
		t.Errorf("shm C: %+v", m)
	}
	lib := append(runs[:0:0], run(CostLib, 0, 30*ms))
	lib[0].Samples[0].Emitter = -1
	lib[0].N = 2
	if got := SummarizeCost(lib); len(got) != 1 || !math.IsNaN(got[0].Ratio) || !math.IsNaN(got[0].EmitterUS) || got[0].USPerPeriod != 30 {
		t.Errorf("libvigil alone: %+v", got)
	}
	var b strings.Builder
	CostTable(func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, append(runs, lib...))
	for _, w := range []string{
		"| 1ms | 2 | udp | C | udp | 21.0 | 21.0 / 0.0 | 1.00 (1.00–1.00) | 2.00 | 2.100 | 0 | 1 | 0.30 (0.50) |",
		"| 1ms | 2 | udp | vigil | udp | 80.0 | 20.0 / 60.0 | 4.00 (2.00–5.24) | 2.00 | 8.000 | 2 (+3 at stop) | 0 | 0.00 (0.00) |",
		"| 1ms | 2 | udp | libvigil | library default | 30.0 | — / — | 1.43 (1.43–1.43) | 2.00 | 3.000 | 0 | 0 | 0.00 (0.00) |",
	} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, b.String())
		}
	}
}

// TestSplitSuspicions: crash reports before the stop are suspicions,
// those printed after it are counted apart, departures not at all.
func TestSplitSuspicions(t *testing.T) {
	lines := []launch.Line{
		{Ev: "ready", Mono: 1},
		{Ev: "dead", Dead: 1, Mono: 50},
		{Ev: "dead", Dead: 2}, // no time: before
		{Ev: "dead", Dead: 3, Mono: 100},
		{Ev: "dead", Dead: 4, Mono: 120, Left: true},
		{Ev: "stats", Mono: 130},
	}
	if b, a := splitSuspicions(lines, 100); b != 2 || a != 1 {
		t.Fatalf("before %d, after %d", b, a)
	}
}

func TestCostBadConfig(t *testing.T) {
	for _, c := range []CostConfig{
		{Ns: []int{2}, Transports: []string{CostUDP}},
		{Hs: []time.Duration{time.Millisecond}, Ns: []int{1}, Transports: []string{CostUDP}},
		{Hs: []time.Duration{time.Millisecond}, Ns: []int{2}, Transports: []string{"tcp"}},
	} {
		if _, err := Cost(t.Context(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// buildHBCost compiles the C reference, or skips without a C compiler.
func buildHBCost(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc): scripts/deps.sh test installs gcc")
	}
	bin, err := BuildHBCost(context.Background(), "..", t.TempDir()) // tests run in bench/
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestHBCostC runs a ring of C reference processes over each transport
// for a moment: heartbeats go round and nobody is suspected; a bad
// argument is refused.
func TestHBCostC(t *testing.T) {
	bin := buildHBCost(t)
	for _, tr := range []string{CostUDP, CostSHM} {
		j, err := startHBCost(bin, tr, 3, time.Millisecond, 10*time.Millisecond, time.Second, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		res, err := j.stop()
		if err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
		if len(res) != 3 {
			t.Fatalf("%s: %d results", tr, len(res))
		}
		for i, r := range res {
			if r.Sent == 0 || r.Checks == 0 || r.Received == 0 || r.Suspicions != 0 || r.Checks > r.Sent {
				t.Errorf("%s rank %d: %+v", tr, i, r)
			}
		}
		if tr == CostSHM {
			if _, err := os.Stat(shmPath(j.shm)); !os.IsNotExist(err) {
				t.Errorf("shared memory %s left behind: %v", j.shm, err)
			}
		}
	}
	out, err := exec.Command(bin, "tcp", "0", "2", "1000", "10000", "100000", "40000", "100").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "want udp or shm") {
		t.Errorf("transport tcp: %v, %q", err, out)
	}
	out, err = exec.Command(bin, "udp", "2", "2", "1000", "10000", "100000", "40000", "100").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "RANK < N") {
		t.Errorf("rank 2 of 2: %v, %q", err, out)
	}
}

// TestCostRun runs the part for real at N = 2, h = 10 ms, one round: every
// side sampled with positive CPU, and the C reference suspected nobody.
// It checks the harness, not the machine's speed.
func TestCostRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds vigil and starts agents")
	}
	cbin := buildHBCost(t)
	vbin := buildVigil(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var log strings.Builder
	hbin, err := BuildHBHost(ctx, "..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	runs, err := Cost(ctx, CostConfig{CBin: cbin, VigilBin: vbin, HostBin: hbin, Hs: []time.Duration{10 * time.Millisecond}, Ns: []int{2},
		Transports: []string{CostUDP}, Rounds: 1, Window: 2 * time.Second, Warmup: 500 * time.Millisecond, RealTime: true, Log: &log})
	t.Log(log.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[0].Side != CostC || runs[1].Side != CostVigil || runs[2].Side != CostLib {
		t.Fatalf("runs %+v", runs)
	}
	for _, r := range runs {
		if len(r.Samples) != 2 || r.Lost != 0 {
			t.Fatalf("%s: %d samples, %d lost", r.Side, len(r.Samples), r.Lost)
		}
		for _, s := range r.Samples {
			if s.CPU <= 0 || s.Window < 2*time.Second || s.CtxSwitches == 0 || s.Emitter > s.CPU {
				t.Errorf("%s: sample %+v", r.Side, s)
			}
		}
	}
	if runs[0].Suspicions != 0 {
		t.Errorf("the C reference suspected %d times", runs[0].Suspicions)
	}
	sum := SummarizeCost(runs)
	if len(sum) != 3 {
		t.Fatalf("summary %+v", sum)
	}
	for _, s := range sum {
		if math.IsNaN(s.Ratio) || s.Ratio <= 0 {
			t.Errorf("summary %+v", s)
		}
	}
}
