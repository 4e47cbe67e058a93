package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/ranks"
)

// The variants of the lateness part: the same timer loop with no runtime
// (bench/csrc/lateness.c), Vigil's emitter (heartbeat.Emitter, as the agent
// runs it), and Vigil's emitter in a process whose other goroutines
// allocate (a Go application with the detector inside: the garbage
// collector's stop-the-world pauses include the emitter).
const (
	LatC       = "C loop"
	LatGo      = "Go emitter"
	LatGoAlloc = "Go emitter + allocating process"
)

// latVariants is the order of a round; each round rotates it by one, so
// machine drift does not favour one variant.
var latVariants = []string{LatC, LatGo, LatGoAlloc}

// latGarbageMBps is the allocation rate of the LatGoAlloc variant.
const latGarbageMBps = 64

// Idle is the lateness part's load with nothing else running.
const Idle = "idle"

// LatenessConfig configures the lateness part.
type LatenessConfig struct {
	// CBin is the C loop (BuildLateness) and BenchBin the bench
	// module's vigil-bench command (its `child emitter`).
	CBin, BenchBin string
	Hs             []time.Duration
	// Duration is each run's length; Rounds the runs per variant, load
	// and h.
	Duration time.Duration
	Rounds   int
	// Loads are Idle and/or Compute (one burner per CPU).
	Loads []string
	// RealTime asks for SCHED_FIFO for both loops.
	RealTime bool
	Log      io.Writer
}

// LatenessRow is one run of one variant.
type LatenessRow struct {
	Load    string
	H       time.Duration
	Round   int
	Variant string
	LatenessResult
	// Steal is the CPU time the hypervisor took from this virtual
	// machine during the run, summed over CPUs (/proc/stat, 10 ms ticks;
	// -1 when unreadable): lateness that no code in the guest can avoid.
	Steal time.Duration
}

// LatenessResult is what a loop reports: wake-ups, wake-ups more than one
// period late (missed deadlines), the worst lateness, whether SCHED_FIFO
// was granted, and for the Go loops the garbage collections during the run.
type LatenessResult struct {
	Wakeups, Missed uint64
	MaxLate         time.Duration
	FIFO            bool
	GCs             uint64
}

// BuildLateness compiles bench/csrc/lateness.c into dir with the C
// compiler (cc) and returns the executable's path.
func BuildLateness(ctx context.Context, root, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "lateness")
	cmd := exec.CommandContext(ctx, "cc", "-O2", "-Wall", "-o", bin, filepath.Join(root, "bench", "csrc", "lateness.c"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: cc lateness.c: %w\n%s", err, out)
	}
	return bin, nil
}

// Lateness runs the C loop and the Go emitter side by side: for each load,
// h and round, every variant in turn (rotated each round) for Duration.
func Lateness(ctx context.Context, cfg LatenessConfig) ([]LatenessRow, error) {
	if cfg.Rounds <= 0 || cfg.Duration <= 0 || len(cfg.Hs) == 0 {
		return nil, errors.New("bench: lateness: want Rounds, Duration and Hs")
	}
	var rows []LatenessRow
	for _, load := range cfg.Loads {
		var burners *Burners
		switch load {
		case Idle:
		case Compute:
			var err error
			if burners, err = StartBurners(0); err != nil {
				return rows, err
			}
		default:
			return rows, fmt.Errorf("bench: lateness: load %q (want %s or %s)", load, Idle, Compute)
		}
		err := func() error {
			for _, h := range cfg.Hs {
				for round := range cfg.Rounds {
					for i := range latVariants {
						v := latVariants[(i+round)%len(latVariants)]
						if ctx.Err() != nil {
							return ctx.Err()
						}
						steal0, serr := StealTime()
						r, err := runLateness(ctx, cfg, v, h)
						if err != nil {
							return err
						}
						steal1, serr1 := StealTime()
						row := LatenessRow{Load: load, H: h, Round: round, Variant: v, LatenessResult: r, Steal: steal1 - steal0}
						if serr != nil || serr1 != nil {
							row.Steal = -1
						}
						rows = append(rows, row)
						if cfg.Log != nil {
							fmt.Fprintf(cfg.Log, "lateness %-7s h=%-6v round %d %-31s fifo=%-5v wake-ups %d, missed %d, worst %v, GCs %d, steal %v\n",
								load, h, round, v, r.FIFO, r.Wakeups, r.Missed, r.MaxLate, r.GCs, row.Steal)
						}
					}
				}
			}
			return nil
		}()
		if burners != nil {
			burners.Stop()
		}
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

func runLateness(ctx context.Context, cfg LatenessConfig, variant string, h time.Duration) (LatenessResult, error) {
	fifo := "0"
	if cfg.RealTime {
		fifo = "1"
	}
	var cmd *exec.Cmd
	switch variant {
	case LatC:
		cmd = exec.CommandContext(ctx, cfg.CBin, strconv.FormatInt(h.Microseconds(), 10),
			strconv.FormatInt(cfg.Duration.Milliseconds(), 10), fifo)
	default:
		garbage := 0
		if variant == LatGoAlloc {
			garbage = latGarbageMBps
		}
		cmd = exec.CommandContext(ctx, cfg.BenchBin, "child", "emitter", "-h", h.String(), "-d", cfg.Duration.String(),
			"-fifo="+strconv.FormatBool(cfg.RealTime), "-garbage", strconv.Itoa(garbage))
	}
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return LatenessResult{}, fmt.Errorf("bench: lateness %s: %w", variant, err)
	}
	return ParseLateness(string(out))
}

// StealTime returns the steal time of the machine so far (the "cpu" line
// of /proc/stat, eighth value, in USER_HZ ticks of 10 ms).
func StealTime() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseSteal(string(b))
}

func parseSteal(stat string) (time.Duration, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("bench: /proc/stat: first line %q has no steal field", line)
	}
	ticks, err := strconv.ParseUint(f[8], 10, 63)
	if err != nil {
		return 0, fmt.Errorf("bench: /proc/stat: steal %q: %w", f[8], err)
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// ParseLateness reads the line a loop prints:
//
//	lateness wakeups=<n> missed=<n> max_ns=<n> fifo=<0|1> [gcs=<n>]
func ParseLateness(out string) (LatenessResult, error) {
	var r LatenessResult
	line := strings.TrimSpace(out)
	if i := strings.LastIndex(line, "\n"); i >= 0 {
		line = line[i+1:]
	}
	f := strings.Fields(line)
	if len(f) == 0 || f[0] != "lateness" {
		return r, fmt.Errorf("bench: lateness line %q: want \"lateness key=value…\"", line)
	}
	seen := map[string]bool{}
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 63)
		if !ok || err != nil || seen[k] {
			return r, fmt.Errorf("bench: lateness line %q: bad field %q", line, kv)
		}
		seen[k] = true
		switch k {
		case "wakeups":
			r.Wakeups = n
		case "missed":
			r.Missed = n
		case "max_ns":
			r.MaxLate = time.Duration(n)
		case "fifo":
			if n > 1 {
				return r, fmt.Errorf("bench: lateness line %q: fifo=%d, want 0 or 1", line, n)
			}
			r.FIFO = n == 1
		case "gcs":
			r.GCs = n
		default:
			return r, fmt.Errorf("bench: lateness line %q: unknown field %q", line, k)
		}
	}
	for _, k := range []string{"wakeups", "missed", "max_ns", "fifo"} {
		if !seen[k] {
			return r, fmt.Errorf("bench: lateness line %q: %s missing", line, k)
		}
	}
	if r.Missed > r.Wakeups {
		return r, fmt.Errorf("bench: lateness line %q: more missed deadlines than wake-ups", line)
	}
	return r, nil
}

// EmitterChild is the body of `vigil-bench child emitter`: Vigil's
// emitter thread (heartbeat.Emitter as the agent runs it: a locked OS
// thread that keeps a P, SCHED_FIFO when asked and permitted) with a Send
// that does nothing, for -d, while another goroutine allocates -garbage
// MB/s. It prints the lateness line of the C loop, with the number of
// garbage collections.
func EmitterChild(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("child emitter", flag.ContinueOnError)
	h := fs.Duration("h", time.Millisecond, "heartbeat period")
	d := fs.Duration("d", 5*time.Second, "how long to run")
	fifo := fs.Bool("fifo", true, "ask for SCHED_FIFO")
	garbage := fs.Int("garbage", 0, "MB/s allocated by another goroutine meanwhile")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *h <= 0 || *d <= 0 || *garbage < 0 {
		return fmt.Errorf("child emitter: want -h > 0, -d > 0, -garbage ≥ 0")
	}
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1) // the P the emitter keeps, as node.Start does
	e, err := heartbeat.NewEmitter(heartbeat.EmitterConfig{Period: h.Nanoseconds(), CPU: -1, RealTime: *fifo, HoldP: true,
		Send: func(ranks.Rank, uint64) error { return nil }})
	if err != nil {
		return err
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		allocate(*garbage, stop)
	}()
	e.SetObserver(1)
	if err := e.Start(); err != nil {
		close(stop)
		<-done
		return err
	}
	time.Sleep(*d)
	close(stop)
	<-done
	if err := e.Close(); err != nil {
		return err
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	st := e.Stats()
	f := 0
	if st.RealTime {
		f = 1
	}
	_, err = fmt.Fprintf(stdout, "lateness wakeups=%d missed=%d max_ns=%d fifo=%d gcs=%d\n", st.Sent, st.Missed, st.MaxLateNs, f,
		after.NumGC-before.NumGC)
	return err
}

// garbageSink keeps the last allocations reachable for a while, so that
// the collector has a small live heap to mark, as an application would.
var garbageSink [64][]byte

// allocate allocates mbps MB/s in 64 KiB blocks, a burst every millisecond,
// until stop is closed (returns at once for mbps 0).
func allocate(mbps int, stop <-chan struct{}) {
	if mbps == 0 {
		<-stop
		return
	}
	perTick := max(1, mbps*1_000_000/1000/(64<<10)) // 64 KiB blocks per millisecond
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for i := 0; ; {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for range perTick {
			garbageSink[i%len(garbageSink)] = make([]byte, 64<<10)
			i++
		}
	}
}

// LatenessSummary is one load, h and variant over its rounds: the median
// of the runs' missed deadlines per 1,000 periods and of their worst
// lateness, the worst lateness of all runs, and the ratios of the two
// medians to the C loop's in the same load and h.
type LatenessSummary struct {
	Load    string
	H       time.Duration
	Variant string
	Rounds  int
	// MissedPerK and MedianMax are medians over the rounds; WorstMax the
	// maximum over them.
	MissedPerK          float64
	MedianMax, WorstMax time.Duration
	// MaxOverC is MedianMax / the C loop's MedianMax (1 for the C loop;
	// NaN without a C run).
	MaxOverC float64
	GCs      uint64
	FIFO     bool
	// Steal sums the rounds' steal time (negative if any was unknown).
	Steal time.Duration
}

// SummarizeLateness groups rows by load, h and variant, in the order they
// first ran (variants in latVariants order).
func SummarizeLateness(rows []LatenessRow) []LatenessSummary {
	type key struct {
		load string
		h    time.Duration
	}
	var order []key
	byKey := map[key]map[string][]LatenessRow{}
	for _, r := range rows {
		k := key{r.Load, r.H}
		if byKey[k] == nil {
			byKey[k] = map[string][]LatenessRow{}
			order = append(order, k)
		}
		byKey[k][r.Variant] = append(byKey[k][r.Variant], r)
	}
	var out []LatenessSummary
	for _, k := range order {
		var cMax float64
		var group []LatenessSummary
		for _, v := range latVariants {
			rs := byKey[k][v]
			if len(rs) == 0 {
				continue
			}
			s := LatenessSummary{Load: k.load, H: k.h, Variant: v, Rounds: len(rs), FIFO: true}
			var perK, maxes []float64
			for _, r := range rs {
				if r.Wakeups > 0 {
					perK = append(perK, 1000*float64(r.Missed)/float64(r.Wakeups))
				}
				maxes = append(maxes, float64(r.MaxLate))
				s.WorstMax = max(s.WorstMax, r.MaxLate)
				s.GCs += r.GCs
				s.FIFO = s.FIFO && r.FIFO
				if r.Steal < 0 || s.Steal < 0 {
					s.Steal = -1
				} else {
					s.Steal += r.Steal
				}
			}
			s.MissedPerK = Quantile(perK, 0.5)
			s.MedianMax = time.Duration(Quantile(maxes, 0.5))
			if v == LatC {
				cMax = float64(s.MedianMax)
			}
			group = append(group, s)
		}
		for i := range group {
			group[i].MaxOverC = float64(group[i].MedianMax) / cMax
			if cMax == 0 {
				group[i].MaxOverC = math.NaN()
			}
		}
		out = append(out, group...)
	}
	return out
}
