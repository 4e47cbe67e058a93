package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// MPIBuild is the C load program built against Debian's Open MPI:
// IMB without the detector, and IMBVigil with Vigil's detector running in
// the application process (linked with libvigil).
type MPIBuild struct {
	Dir, IMB, IMBVigil string
}

// BuildMPI compiles bench/csrc/imb.c from the module at root into dir with
// mpicc, and libvigil (./capi, c-shared, without PMIx: the program starts
// the detector with an MPI_Allgather) with go.
func BuildMPI(ctx context.Context, root, dir string) (MPIBuild, error) {
	b := MPIBuild{Dir: dir, IMB: filepath.Join(dir, "imb"), IMBVigil: filepath.Join(dir, "imb-vigil")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return b, err
	}
	src := filepath.Join(root, "bench", "csrc", "imb.c")
	steps := [][]string{
		{"mpicc", "-O2", "-Wall", "-o", b.IMB, src},
		{"go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "libvigil.so"), "./capi"},
		{"mpicc", "-O2", "-Wall", "-DWITH_VIGIL", "-I" + filepath.Join(root, "csrc"), "-o", b.IMBVigil, src,
			"-L" + dir, "-lvigil", "-Wl,-rpath," + dir},
	}
	for _, s := range steps {
		cmd := exec.CommandContext(ctx, s[0], s[1:]...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("bench: %s: %w\n%s", strings.Join(s, " "), err, out)
		}
	}
	return b, nil
}

// MPIRun is one mpirun of the C load program.
type MPIRun struct {
	// Bin is MPIBuild.IMB or MPIBuild.IMBVigil.
	Bin string
	// Ranks is the number of MPI processes.
	Ranks int
	Loads []Load
	Sizes []int
	// MaxReps and TimeLimit are IMB's repetition cap and per-size time.
	MaxReps   int
	TimeLimit time.Duration
	// Env is passed to every rank (mpirun -x), e.g. VIGIL_H=1ms.
	Env []string
	// Bind is mpirun's --bind-to (default: "core" when there are no more
	// ranks than CPUs, else "none"). Unbound busy-polling ranks that land
	// on the same CPU turn a sub-microsecond PingPong into a 4 ms
	// scheduler tick, which would swamp any detector effect.
	Bind string
}

// MPIOutput is what the program printed.
type MPIOutput struct {
	Results []Result
	// VigilEvents is the number of failures the in-process detector
	// reported, summed over ranks (−1 without the detector). Nobody dies
	// during a load, so every one is a false suspicion.
	VigilEvents int
}

// mpirunArgs builds the mpirun command line.
func (r MPIRun) mpirunArgs() []string {
	bind := r.Bind
	if bind == "" {
		bind = "none"
		if r.Ranks <= runtime.NumCPU() {
			bind = "core"
		}
	}
	a := []string{"--oversubscribe", "--bind-to", bind, "-n", strconv.Itoa(r.Ranks)}
	if os.Geteuid() == 0 {
		a = append([]string{"--allow-run-as-root"}, a...)
	}
	for _, e := range r.Env {
		a = append(a, "-x", e)
	}
	a = append(a, r.Bin)
	if len(r.Loads) > 0 {
		names := make([]string, len(r.Loads))
		for i, l := range r.Loads {
			names[i] = string(l)
		}
		a = append(a, "-b", strings.Join(names, ","))
	}
	if len(r.Sizes) > 0 {
		s := make([]string, len(r.Sizes))
		for i, v := range r.Sizes {
			s[i] = strconv.Itoa(v)
		}
		a = append(a, "-sizes", strings.Join(s, ","))
	}
	if r.MaxReps > 0 {
		a = append(a, "-reps", strconv.Itoa(r.MaxReps))
	}
	if r.TimeLimit > 0 {
		a = append(a, "-time", strconv.FormatFloat(r.TimeLimit.Seconds(), 'f', -1, 64))
	}
	return a
}

// Run executes the program under mpirun and parses its output.
func (r MPIRun) Run(ctx context.Context) (MPIOutput, error) {
	if r.Ranks < 2 {
		return MPIOutput{}, fmt.Errorf("bench: MPI run with %d ranks, want ≥ 2", r.Ranks)
	}
	cmd := exec.CommandContext(ctx, "mpirun", r.mpirunArgs()...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), r.Env...)
	if err := cmd.Run(); err != nil {
		return MPIOutput{}, fmt.Errorf("bench: mpirun %s: %w\n%s", filepath.Base(r.Bin), err, tail(stderr.String(), 2000))
	}
	return ParseMPIOutput(stdout.String())
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// ParseMPIOutput reads the program's CSV lines (see bench/csrc/imb.c);
// other lines are ignored.
func ParseMPIOutput(out string) (MPIOutput, error) {
	o := MPIOutput{VigilEvents: -1}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Split(line, ",")
		switch {
		case f[0] == "imb":
			r, err := parseIMBLine(f)
			if err != nil {
				return o, fmt.Errorf("bench: line %q: %w", line, err)
			}
			o.Results = append(o.Results, r)
		case f[0] == "vigil" && len(f) == 4:
			n, err := strconv.Atoi(f[3])
			if err != nil || n < 0 {
				return o, fmt.Errorf("bench: line %q: bad event count", line)
			}
			o.VigilEvents = n
		}
	}
	if len(o.Results) == 0 {
		return o, fmt.Errorf("bench: the MPI program printed no result")
	}
	return o, nil
}

func parseIMBLine(f []string) (Result, error) {
	if len(f) != 8 {
		return Result{}, fmt.Errorf("%d fields, want 8", len(f))
	}
	l, err := ParseLoad(f[1])
	if err != nil {
		return Result{}, err
	}
	var iv [3]int
	for i := range iv {
		if iv[i], err = strconv.Atoi(f[2+i]); err != nil || iv[i] < 0 {
			return Result{}, fmt.Errorf("field %d: %q is not a count", 3+i, f[2+i])
		}
	}
	var us [3]float64
	for i := range us {
		// In µs; beyond what a time.Duration holds (about 292 years) it is
		// no measurement.
		if us[i], err = strconv.ParseFloat(f[5+i], 64); err != nil || us[i] < 0 || us[i] >= math.MaxInt64/1e3 {
			return Result{}, fmt.Errorf("field %d: %q is not a time", 6+i, f[5+i])
		}
	}
	d := func(x float64) time.Duration { return time.Duration(x * 1e3) }
	return Result{Load: l, Ranks: iv[0], Size: iv[1], Reps: iv[2],
		RankTimes: RankTimes{TMin: d(us[0]), TMax: d(us[1]), TAvg: d(us[2])}}, nil
}
