package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/launch"
)

// The sides of the cost part: the C reference (bench/csrc/hbcost.c),
// Vigil's agents (`vigil agent`), the same agents with their heartbeat
// thread in Go (`-emitter go`), and libvigil's detector in a host process
// that does nothing else (bench/csrc/hbhost.c).
const (
	CostC       = "C"
	CostVigil   = "vigil"
	CostVigilGo = "vigil-go"
	CostLib     = "libvigil"
)

// costSides is the order of the sides; each round rotates it by one.
var costSides = []string{CostC, CostVigil, CostVigilGo, CostLib}

// Heartbeat transports of the cost part (the C reference's; the agents'
// with CostHeartbeatMatch).
const (
	CostUDP = "udp"
	CostSHM = "shm"
)

// CostHeartbeatMatch, as CostConfig.Heartbeat, passes each
// configuration's transport to the agents as -heartbeat.
const CostHeartbeatMatch = "match"

// Defaults of CostConfig.
const (
	costRounds  = 3
	costPeriods = 200
	costWindow  = 2 * time.Second
	costWarmup  = time.Second
	// costMinDelta is the smallest δ of the cost part: it measures cost,
	// and an agent declared dead (and exiting) would cut its window short.
	costMinDelta = 100 * time.Millisecond
	// costSlack is how much longer than its warm-up and window a C
	// process is told to run; it is stopped by SIGTERM before.
	costSlack = 30 * time.Second
)

// CostTimes returns the δ and check period the cost part uses at h:
// δ = max(10h, 100 ms) and check = δ/10, for both sides.
func CostTimes(h time.Duration) (delta, check time.Duration) {
	delta = max(10*h, costMinDelta)
	return delta, delta / 10
}

// CostConfig configures the cost part: the detector's own CPU per
// heartbeat period and process, Vigil's agents beside the C reference
// doing the same emit-and-check work, in alternate rounds.
type CostConfig struct {
	// CBin is the C reference (BuildHBCost) and VigilBin the vigil
	// executable. HostBin, when set, is the libvigil host (BuildHBHost):
	// the in-process side runs too.
	CBin, VigilBin, HostBin string
	Hs                      []time.Duration
	Ns                      []int
	// Transports are CostUDP and/or CostSHM.
	Transports []string
	// Rounds is the rounds per configuration, each one run of each side,
	// in an order rotated by one every round (default 3).
	Rounds int
	// A sampling window lasts Periods·h (default 200), at least Window
	// (default 2 s) and, when MaxWindow > 0, at most MaxWindow or Window,
	// whichever is longer.
	Periods           int
	Window, MaxWindow time.Duration
	// Warmup is waited after every process is up, before the window
	// (default 1 s; at least 2h).
	Warmup time.Duration
	// Heartbeat, when not empty, is passed to the agents as -heartbeat;
	// CostHeartbeatMatch passes the configuration's transport.
	Heartbeat string
	// RealTime asks for SCHED_FIFO for the agents' emitter thread.
	RealTime bool
	// GoEmitter adds the side CostVigilGo: agents whose heartbeat thread
	// runs in Go (`-emitter go`), against the default native thread.
	GoEmitter bool
	// Delta, when positive, is δ on every side instead of CostTimes's,
	// with the check period δ/10: a tight δ shows whether the detector
	// reports gaps the C reference does not see.
	Delta time.Duration
	Log   io.Writer
}

// window returns the sampling window at h.
func (c CostConfig) window(h time.Duration) time.Duration {
	w := time.Duration(c.Periods) * h
	if c.MaxWindow > 0 {
		w = min(w, c.MaxWindow)
	}
	return max(w, c.Window)
}

// CostSample is one process's account over a sampling window.
type CostSample struct {
	Rank   int
	Window time.Duration
	// CPU is the on-CPU time of all the process's threads; Emitter that of
	// its heartbeat thread (the C reference's only thread; -1 when it was
	// not found).
	CPU, Emitter time.Duration
	CtxSwitches  uint64
}

// CostRun is one side of one round of one configuration.
type CostRun struct {
	Transport    string
	H            time.Duration
	Delta, Check time.Duration
	N            int
	Side         string
	Round        int
	// Heartbeat is what the agents were passed as -heartbeat (empty: the
	// flag was not passed).
	Heartbeat string
	// EmitterHow says how the agents' heartbeat thread was found.
	EmitterHow string
	Samples    []CostSample
	// Lost counts processes that exited before the window closed (they
	// have no sample).
	Lost int
	// Background is the CPU, in cores, that the rest of the machine (the
	// harness included) used during the window, and Steal the time the
	// hypervisor took (both NaN or negative when unknown): a round run
	// beside other work is not comparable.
	Background float64
	Steal      time.Duration
	// Suspicions counts false suspicions before the stop (SUSPECT lines
	// of the C reference, "dead" reports of the agents), and AtStop the
	// agents' reports of a crash printed once the stop had begun (ranks
	// leaving at once). Missed sums the agents' missed heartbeat
	// deadlines (C: wake-ups more than a period late).
	Suspicions, AtStop int
	// Suspected counts the distinct ranks the agents reported crashed
	// before the stop (0 for the C reference, whose SUSPECT lines are
	// gaps).
	Suspected int
	Missed    uint64
}

// Periods returns the number of heartbeat periods in s's window.
func (r CostRun) Periods(s CostSample) float64 { return float64(s.Window) / float64(r.H) }

// USPerPeriod returns s's CPU in µs per heartbeat period.
func (r CostRun) USPerPeriod(s CostSample) float64 { return float64(s.CPU) / 1e3 / r.Periods(s) }

// HBCostResult is the line the C reference prints when it stops.
type HBCostResult struct {
	Sent, Checks, Received, Suspicions, Missed uint64
	MaxLate                                    time.Duration
}

// BuildHBHost builds libvigil (./capi, c-shared, without PMIx) and
// compiles bench/csrc/hbhost.c against it into dir, and returns the host
// executable's path.
func BuildHBHost(ctx context.Context, root, dir string) (string, error) {
	root, err := filepath.Abs(root) // the commands run in root
	if err != nil {
		return "", err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "hbhost")
	for _, s := range [][]string{
		{"go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "libvigil.so"), "./capi"},
		{"cc", "-O2", "-Wall", "-I" + filepath.Join(root, "csrc"), "-o", bin, filepath.Join(root, "bench", "csrc", "hbhost.c"),
			"-L" + dir, "-lvigil", "-Wl,-rpath," + dir},
	} {
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("bench: %s: %w\n%s", strings.Join(s, " "), err, out)
		}
	}
	return bin, nil
}

// BuildHBCost compiles bench/csrc/hbcost.c into dir with the C compiler
// (cc) and returns the executable's path.
func BuildHBCost(ctx context.Context, root, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "hbcost")
	cmd := exec.CommandContext(ctx, "cc", "-O2", "-Wall", "-o", bin, filepath.Join(root, "bench", "csrc", "hbcost.c"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: cc hbcost.c: %w\n%s", err, out)
	}
	return bin, nil
}

// Cost runs the cost part: for each h, N and transport, Rounds rounds of
// N C reference processes, N agents and, with HostBin, N libvigil hosts,
// one after the other in an order rotated every round, each sampled over
// a window after a warm-up.
func Cost(ctx context.Context, cfg CostConfig) ([]CostRun, error) {
	if cfg.Rounds <= 0 {
		cfg.Rounds = costRounds
	}
	if cfg.Periods <= 0 {
		cfg.Periods = costPeriods
	}
	if cfg.Window <= 0 {
		cfg.Window = costWindow
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = costWarmup
	}
	if len(cfg.Hs) == 0 || len(cfg.Ns) == 0 || len(cfg.Transports) == 0 {
		return nil, errors.New("bench: cost: want Hs, Ns and Transports")
	}
	for _, tr := range cfg.Transports {
		if tr != CostUDP && tr != CostSHM {
			return nil, fmt.Errorf("bench: cost: transport %q (want %s or %s)", tr, CostUDP, CostSHM)
		}
	}
	for _, n := range cfg.Ns {
		if n < 2 {
			return nil, fmt.Errorf("bench: cost: N = %d (want ≥ 2)", n)
		}
	}
	for _, h := range cfg.Hs {
		if h < time.Microsecond {
			return nil, fmt.Errorf("bench: cost: h = %v (want ≥ 1µs)", h)
		}
	}
	var runs []CostRun
	for _, h := range cfg.Hs {
		for _, n := range cfg.Ns {
			for _, tr := range cfg.Transports {
				for round := range cfg.Rounds {
					sides := []string{CostC, CostVigil}
					if cfg.GoEmitter {
						sides = append(sides, CostVigilGo)
					}
					if cfg.HostBin != "" {
						sides = append(sides, CostLib)
					}
					for i := range sides {
						side := sides[(i+round)%len(sides)]
						if err := ctx.Err(); err != nil {
							return runs, err
						}
						r, err := costRun(ctx, cfg, tr, h, n, side, round)
						if err != nil {
							return runs, fmt.Errorf("cost %s h=%v N=%d %s round %d: %w", tr, h, n, side, round, err)
						}
						runs = append(runs, r)
						if cfg.Log != nil {
							cpu, ctxs := medianPerPeriod(r)
							fmt.Fprintf(cfg.Log, "cost %-3s h=%-6v N=%-2d round %d %-8s %7.1f µs/period, %.2f ctx switches/period, suspicions %d (+%d at stop), lost %d, other load %.2f cores, steal %v\n",
								tr, h, n, round, side, cpu, ctxs, r.Suspicions, r.AtStop, r.Lost, r.Background, r.Steal)
						}
					}
				}
			}
		}
	}
	return runs, nil
}

// medianPerPeriod returns the medians over r's samples of µs CPU and
// context switches per period.
func medianPerPeriod(r CostRun) (cpu, ctxSwitches float64) {
	var c, x []float64
	for _, s := range r.Samples {
		c = append(c, r.USPerPeriod(s))
		x = append(x, float64(s.CtxSwitches)/r.Periods(s))
	}
	return Quantile(c, 0.5), Quantile(x, 0.5)
}

// costRun starts one side, lets it warm up, samples every process over
// the window and stops it.
func costRun(ctx context.Context, cfg CostConfig, tr string, h time.Duration, n int, side string, round int) (CostRun, error) {
	delta, check := CostTimes(h)
	if cfg.Delta > 0 {
		delta, check = cfg.Delta, cfg.Delta/10
	}
	window, warm := cfg.window(h), max(cfg.Warmup, 2*h)
	r := CostRun{Transport: tr, H: h, Delta: delta, Check: check, N: n, Side: side, Round: round}
	var pids []int
	var exited []<-chan struct{}
	var stop func() error
	switch side {
	case CostC:
		c, err := startHBCost(cfg.CBin, tr, n, h, check, delta, warm+window+costSlack)
		if err != nil {
			return r, err
		}
		pids, exited, r.EmitterHow = c.pids(), c.exited, "single thread"
		stop = func() error {
			res, err := c.stop()
			for _, x := range res {
				r.Suspicions += int(x.Suspicions)
				r.Missed += x.Missed
			}
			if cfg.Log != nil {
				for _, l := range c.suspectLines() {
					fmt.Fprintf(cfg.Log, "cost %s h=%v N=%d round %d: %s\n", tr, h, n, round, l)
				}
			}
			return err
		}
	case CostVigil, CostVigilGo, CostLib:
		stderr := &tailBuffer{max: 4 << 10}
		var a *AgentJob
		var err error
		if side != CostLib {
			r.Heartbeat = cfg.Heartbeat
			if r.Heartbeat == CostHeartbeatMatch {
				r.Heartbeat = tr
			}
			d := DetectorSpec{H: h, Delta: delta, Check: check, RealTime: cfg.RealTime, Heartbeat: r.Heartbeat}
			if side == CostVigilGo {
				d.Emitter = "go"
			}
			a, err = StartAgents(cfg.VigilBin, n, d, stderr)
		} else {
			rt := "0"
			if cfg.RealTime {
				rt = "1"
			}
			a, err = startJob(n, []string{cfg.HostBin}, launch.Options{Stderr: stderr, ExtraEnv: []string{
				"VIGIL_H=" + h.String(), "VIGIL_DELTA=" + delta.String(), "VIGIL_CHECK=" + check.String(), "VIGIL_REALTIME=" + rt}})
		}
		if err != nil {
			return r, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		pids, exited = a.Pids(), a.Exited()
		stop = func() error {
			stopMono := MonoNow()
			r.Missed = a.Stop().Missed
			r.Suspicions, r.AtStop = splitSuspicions(a.log, stopMono)
			r.Suspected = suspectedBefore(a.log, stopMono)
			return nil
		}
	default:
		return r, fmt.Errorf("bench: cost: side %q", side)
	}
	sleepCtx(ctx, warm)
	emitters := make([]int, len(pids))
	if side != CostC {
		hows := map[string]bool{}
		for i, pid := range pids {
			tid, how, err := EmitterThread(pid)
			if err == nil {
				emitters[i] = tid
				hows[how] = true
			}
		}
		r.EmitterHow = strings.Join(slices.Sorted(maps.Keys(hows)), "; ")
	}
	before := make([]ProcCost, len(pids))
	m0, merr := ReadMachineCPU()
	t0 := time.Now()
	for i, pid := range pids {
		before[i], _ = ReadProcCost(pid) // a process gone already has no sample
	}
	sleepCtx(ctx, window)
	var used time.Duration // by the sampled processes
	for i, pid := range pids {
		after, err := ReadProcCost(pid)
		if err != nil || before[i].Threads == nil || closed(exited[i]) {
			r.Lost++
			continue
		}
		s := CostSample{Rank: i, Window: after.At.Sub(before[i].At), Emitter: -1}
		var em time.Duration
		s.CPU, em, s.CtxSwitches = after.Since(before[i], emitters[i])
		switch {
		case side == CostC:
			s.Emitter = s.CPU
		case emitters[i] > 0:
			s.Emitter = em
		}
		r.Samples = append(r.Samples, s)
		used += s.CPU
	}
	m1, err := ReadMachineCPU()
	r.Background, r.Steal = math.NaN(), -1
	if merr == nil && err == nil {
		elapsed := time.Since(t0)
		r.Background = float64(m1.Busy(m0, elapsed)-used) / float64(elapsed)
		r.Steal = m1.Steal - m0.Steal
	}
	if err := stop(); err != nil {
		return r, err
	}
	return r, ctx.Err()
}

// splitSuspicions counts the crash reports ("dead", not left) printed
// before stopMono and from then on (CLOCK_MONOTONIC; a line without a time
// counts before).
func splitSuspicions(lines []launch.Line, stopMono int64) (before, after int) {
	for _, l := range lines {
		if l.Ev != "dead" || l.Left {
			continue
		}
		if l.Mono != 0 && l.Mono >= stopMono {
			after++
		} else {
			before++
		}
	}
	return before, after
}

// suspectedBefore counts the distinct ranks reported crashed before
// stopMono (as splitSuspicions counts the reports).
func suspectedBefore(lines []launch.Line, stopMono int64) int {
	ranks := map[uint32]bool{}
	for _, l := range lines {
		if l.Ev == "dead" && !l.Left && (l.Mono == 0 || l.Mono < stopMono) {
			ranks[l.Dead] = true
		}
	}
	return len(ranks)
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// hbCostJob is N running C reference processes.
type hbCostJob struct {
	cmds           []*exec.Cmd
	stdout, stderr []*bytes.Buffer
	errs           []error
	exited         []<-chan struct{}
	shm            string
}

// shmSeq numbers this process's shared-memory segments.
var shmSeq struct {
	sync.Mutex
	n int
}

// startHBCost starts n C reference processes for d.
func startHBCost(bin, tr string, n int, h, check, delta, d time.Duration) (*hbCostJob, error) {
	j := &hbCostJob{errs: make([]error, n)}
	var where string
	switch tr {
	case CostUDP:
		base, err := freeUDPPorts(n)
		if err != nil {
			return nil, err
		}
		where = strconv.Itoa(base)
	case CostSHM:
		shmSeq.Lock()
		shmSeq.n++
		j.shm = fmt.Sprintf("/vigil-hbcost-%d-%d", os.Getpid(), shmSeq.n)
		shmSeq.Unlock()
		os.Remove(shmPath(j.shm))
		where = j.shm
	default:
		return nil, fmt.Errorf("bench: cost: transport %q", tr)
	}
	us := func(d time.Duration) string { return strconv.FormatInt(max(d.Microseconds(), 1), 10) }
	for rank := range n {
		cmd := exec.Command(bin, tr, strconv.Itoa(rank), strconv.Itoa(n), us(h), us(check), us(delta), where,
			strconv.FormatInt(d.Milliseconds(), 10))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			j.stop()
			return nil, fmt.Errorf("bench: starting %s: %w", bin, err)
		}
		ex := make(chan struct{})
		go func() {
			j.errs[rank] = cmd.Wait()
			close(ex)
		}()
		j.cmds, j.stdout, j.stderr, j.exited = append(j.cmds, cmd), append(j.stdout, &out), append(j.stderr, &errb), append(j.exited, ex)
	}
	return j, nil
}

func shmPath(name string) string { return filepath.Join("/dev/shm", strings.TrimPrefix(name, "/")) }

func (j *hbCostJob) pids() []int {
	p := make([]int, len(j.cmds))
	for i, c := range j.cmds {
		p[i] = c.Process.Pid
	}
	return p
}

// stop sends SIGTERM to every process, waits for them and reads their
// results.
func (j *hbCostJob) stop() ([]HBCostResult, error) {
	for _, c := range j.cmds {
		c.Process.Signal(syscall.SIGTERM)
	}
	var res []HBCostResult
	var errs []error
	for i, c := range j.cmds {
		select {
		case <-j.exited[i]:
		case <-time.After(5 * time.Second):
			c.Process.Kill()
			<-j.exited[i]
		}
		if j.errs[i] != nil {
			errs = append(errs, fmt.Errorf("bench: hbcost rank %d: %w: %s", i, j.errs[i], lastLines(j.stderr[i].String(), 3)))
			continue
		}
		r, err := ParseHBCost(j.stdout[i].String())
		if err != nil {
			errs = append(errs, fmt.Errorf("rank %d: %w", i, err))
			continue
		}
		res = append(res, r)
	}
	if j.shm != "" {
		os.Remove(shmPath(j.shm))
	}
	return res, errors.Join(errs...)
}

// suspectLines returns the SUSPECT lines the processes printed, once
// they have exited.
func (j *hbCostJob) suspectLines() []string {
	var out []string
	for _, b := range j.stderr {
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.Contains(l, "SUSPECT") {
				out = append(out, l)
			}
		}
	}
	return out
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " / ")
}

// freeUDPPorts finds n consecutive UDP ports free on 127.0.0.1 and
// returns the first.
func freeUDPPorts(n int) (int, error) {
	for range 50 {
		base := 20000 + rand.IntN(40000-n)
		var conns []net.PacketConn
		ok := true
		for p := base; p < base+n; p++ {
			c, err := net.ListenPacket("udp4", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				break
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
		if ok {
			return base, nil
		}
	}
	return 0, fmt.Errorf("bench: no %d consecutive free UDP ports found", n)
}

// ParseHBCost reads the line the C reference prints (the last line of
// out):
//
//	hbcost sent=<n> checks=<n> received=<n> suspicions=<n> missed=<n> max_late_ns=<n>
func ParseHBCost(out string) (HBCostResult, error) {
	var r HBCostResult
	line := strings.TrimSpace(out)
	if i := strings.LastIndex(line, "\n"); i >= 0 {
		line = line[i+1:]
	}
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "hbcost" {
		return r, fmt.Errorf("bench: hbcost line %q: want \"hbcost key=value…\"", line)
	}
	fields := map[string]*uint64{"sent": &r.Sent, "checks": &r.Checks, "received": &r.Received,
		"suspicions": &r.Suspicions, "missed": &r.Missed}
	var maxLate uint64
	fields["max_late_ns"] = &maxLate
	seen := map[string]bool{}
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 63)
		dst := fields[k]
		if !ok || err != nil || seen[k] || dst == nil {
			return r, fmt.Errorf("bench: hbcost line %q: bad field %q", line, kv)
		}
		seen[k] = true
		*dst = n
	}
	if len(seen) != len(fields) {
		return r, fmt.Errorf("bench: hbcost line %q: want all of sent, checks, received, suspicions, missed, max_late_ns", line)
	}
	if r.Suspicions > r.Checks {
		return r, fmt.Errorf("bench: hbcost line %q: more suspicions than checks", line)
	}
	r.MaxLate = time.Duration(maxLate)
	return r, nil
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent
// writers.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// CostSummary is one side of one configuration (h, N, transport) over
// its rounds: medians over its processes and rounds.
type CostSummary struct {
	Transport string
	H         time.Duration
	N         int
	Side      string
	// Heartbeat is what the agents were passed as -heartbeat.
	Heartbeat string
	Rounds    int
	// USPerPeriod is CPU µs per heartbeat period per process; EmitterUS
	// and RestUS split it into the heartbeat thread and the rest (NaN when
	// the thread was not found).
	USPerPeriod, EmitterUS, RestUS float64
	// CtxPerPeriod is context switches per period per process; Core the
	// fraction of a CPU a process used.
	CtxPerPeriod, Core       float64
	Samples                  int
	Suspicions, AtStop, Lost int
	// Background is the median and the largest of the rounds' CPU used by
	// the rest of the machine, in cores (CostRun.Background).
	Background, MaxBackground float64
	// Ratio is this side ÷ the C reference: the median over rounds of the
	// round's ratio of median µs per period; RatioMin and RatioMax its
	// range (NaN without a round that ran both).
	Ratio, RatioMin, RatioMax float64
}

// SummarizeCost groups runs by h, N and transport, in the order they ran,
// and within them by side (in costSides order).
func SummarizeCost(runs []CostRun) []CostSummary {
	type key struct {
		h  time.Duration
		n  int
		tr string
	}
	var order []key
	byKey := map[key]map[string][]CostRun{}
	for _, r := range runs {
		k := key{r.H, r.N, r.Transport}
		if byKey[k] == nil {
			byKey[k] = map[string][]CostRun{}
			order = append(order, k)
		}
		byKey[k][r.Side] = append(byKey[k][r.Side], r)
	}
	var out []CostSummary
	for _, k := range order {
		cByRound := map[int]float64{}
		for _, r := range byKey[k][CostC] {
			cByRound[r.Round], _ = medianPerPeriod(r)
		}
		for _, side := range costSides {
			rs := byKey[k][side]
			if len(rs) == 0 {
				continue
			}
			s := CostSummary{Transport: k.tr, H: k.h, N: k.n, Side: side}
			var cpu, em, rest, ctxs, core, ratios, bg []float64
			for _, r := range rs {
				if !math.IsNaN(r.Background) {
					bg = append(bg, r.Background)
				}
				s.Rounds = max(s.Rounds, r.Round+1)
				s.Heartbeat = r.Heartbeat
				s.Suspicions += r.Suspicions
				s.AtStop += r.AtStop
				s.Lost += r.Lost
				for _, x := range r.Samples {
					p := r.Periods(x)
					cpu = append(cpu, r.USPerPeriod(x))
					ctxs = append(ctxs, float64(x.CtxSwitches)/p)
					core = append(core, float64(x.CPU)/float64(x.Window))
					if x.Emitter >= 0 {
						em = append(em, float64(x.Emitter)/1e3/p)
						rest = append(rest, float64(x.CPU-x.Emitter)/1e3/p)
					}
				}
				m, _ := medianPerPeriod(r)
				if c, ok := cByRound[r.Round]; ok && c > 0 && !math.IsNaN(m) {
					ratios = append(ratios, m/c)
				}
			}
			s.Samples = len(cpu)
			s.USPerPeriod, s.EmitterUS, s.RestUS = Quantile(cpu, 0.5), Quantile(em, 0.5), Quantile(rest, 0.5)
			s.CtxPerPeriod, s.Core = Quantile(ctxs, 0.5), Quantile(core, 0.5)
			s.Ratio, s.RatioMin, s.RatioMax = Quantile(ratios, 0.5), Quantile(ratios, 0), Quantile(ratios, 1)
			s.Background, s.MaxBackground = Quantile(bg, 0.5), Quantile(bg, 1)
			out = append(out, s)
		}
	}
	return out
}

// CostTable writes the markdown table of SummarizeCost(runs) with p.
func CostTable(p func(string, ...any), runs []CostRun) {
	p("| h | N | transport | side | heartbeats | µs/period | emitter / rest | ÷ C (min–max) | ctx switches/period | " +
		"%% of a core | suspicions | lost | other load, cores (max) |\n|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	f := func(x float64, prec int) string {
		if math.IsNaN(x) {
			return "—"
		}
		return strconv.FormatFloat(x, 'f', prec, 64)
	}
	for _, s := range SummarizeCost(runs) {
		hbv := s.Heartbeat
		switch {
		case s.Side == CostC:
			hbv = s.Transport
		case s.Side == CostLib:
			hbv = "library default"
		case hbv == "":
			hbv = "agent default"
		}
		susp := strconv.Itoa(s.Suspicions)
		if s.AtStop > 0 {
			susp += fmt.Sprintf(" (+%d at stop)", s.AtStop)
		}
		p("| %v | %d | %s | %s | %s | %s | %s / %s | %s (%s–%s) | %s | %s | %s | %d | %s (%s) |\n", s.H, s.N, s.Transport, s.Side,
			hbv, f(s.USPerPeriod, 1), f(s.EmitterUS, 1), f(s.RestUS, 1), f(s.Ratio, 2), f(s.RatioMin, 2), f(s.RatioMax, 2),
			f(s.CtxPerPeriod, 2), f(100*s.Core, 3), susp, s.Lost, f(s.Background, 2), f(s.MaxBackground, 2))
	}
}
