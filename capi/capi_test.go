package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/lab/mpitest"
	"github.com/vigil-hpc/vigil/lab/testnet"
	"github.com/vigil-hpc/vigil/launch"
)

// The tests build libvigil.so and libvigil.a with `go build -buildmode=...`,
// compile the C programs of csrc/ against them with gcc -Wall -Wextra
// -Werror, and run them: alone (apicheck), as processes configured
// explicitly, under the local launcher, and under mpirun (PMIx).

var (
	tmpRoot string
	libs    sync.Map // tags -> *libBuild
)

func TestMain(m *testing.M) {
	var err error
	if tmpRoot, err = os.MkdirTemp("", "vigil-capi-"); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(tmpRoot)
	os.Exit(code)
}

type libBuild struct {
	once sync.Once
	dir  string
	err  error
}

// needGCC returns gcc's path or skips the test.
func needGCC(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("gcc is not installed (%v): the C ABI tests compile C programs", err)
	}
	return p
}

// lib builds libvigil (.so and .a) with the given build tags, once per
// test binary, and returns its directory.
func lib(t *testing.T, tags string) string {
	t.Helper()
	b, _ := libs.LoadOrStore(tags, &libBuild{})
	lb := b.(*libBuild)
	lb.once.Do(func() {
		lb.dir = filepath.Join(tmpRoot, "lib-"+strings.ReplaceAll(tags+"none", ",", "-"))
		goCmd := "go" // go test puts its own go first in PATH
		for _, mode := range []string{"c-shared", "c-archive"} {
			name := map[string]string{"c-shared": "libvigil.so", "c-archive": "libvigil.a"}[mode]
			cmd := exec.Command(goCmd, "build", "-tags", tags, "-buildmode="+mode, "-o", filepath.Join(lb.dir, name), ".")
			if out, err := cmd.CombinedOutput(); err != nil {
				lb.err = fmt.Errorf("go build -tags %q -buildmode=%s: %v\n%s", tags, mode, err, out)
				return
			}
		}
	})
	if lb.err != nil {
		t.Fatal(lb.err)
	}
	return lb.dir
}

// compileC compiles csrc/<src> against libvigil in libDir (the shared
// library, or the archive if static) and returns the executable's path.
func compileC(t *testing.T, libDir, src string, static bool) string {
	t.Helper()
	return compileCFile(t, libDir, filepath.Join("../csrc", src), static)
}

// compileCFile is compileC of the C file at path (relative to capi/).
func compileCFile(t *testing.T, libDir, path string, static bool) string {
	t.Helper()
	gcc := needGCC(t)
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(path), ".c"))
	args := []string{"-O1", "-g", "-Wall", "-Wextra", "-Werror", "-I../csrc", "-o", out, path}
	if static {
		args = append(args, filepath.Join(libDir, "libvigil.a"), "-lpthread")
		if pc, err := exec.Command("pkg-config", "--libs", "pmix").Output(); err == nil && strings.Contains(libDir, "pmix") {
			args = append(args, strings.Fields(string(pc))...)
		}
	} else {
		args = append(args, "-L"+libDir, "-lvigil", "-lpthread", "-Wl,-rpath,"+libDir)
	}
	if b, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

// cLine is a line printed by the C examples (a superset of launch.Line).
type cLine struct {
	Ev       string   `json:"ev"`
	Rank     uint32   `json:"rank"`
	Dead     uint32   `json:"dead"`
	Left     bool     `json:"left"`
	Detector uint32   `json:"detector"`
	CBThread string   `json:"cb_thread"`
	Polled   int      `json:"polled"`
	DeadSet  []uint32 `json:"dead_set"`
}

func TestCAPICheck(t *testing.T) {
	dir := lib(t, "")
	for _, static := range []bool{false, true} {
		bin := compileC(t, dir, "tests/apicheck.c", static)
		out, err := exec.Command(bin).CombinedOutput()
		if err != nil || !strings.Contains(string(out), " 0 failures") {
			t.Errorf("apicheck (static=%v): %v\n%s", static, err, out)
		} else {
			t.Logf("static=%v: %s", static, strings.TrimSpace(string(out)))
		}
	}
}

// procs is a set of processes of one explicitly configured job.
type procs struct {
	t     *testing.T
	cmds  []*exec.Cmd
	lines chan cLine
	wg    sync.WaitGroup
}

// explicitJob is the job id given to explicit.c: one per test process, so
// that test binaries running at once on one machine do not share the
// abstract unix socket names of their shared-memory rendezvous.
var explicitJob = fmt.Sprintf("%x", 0xc0<<24|os.Getpid()&0xffffff)

// startExplicit runs n ranks of explicit.c in mode, each given opts (its
// options, such as -b ctree) before the mode.
func startExplicit(t *testing.T, bin, mode string, n int, hMs, deltaMs int, opts ...string) *procs {
	addrs := testnet.FreeAddrs(t, n)
	p := &procs{t: t, lines: make(chan cLine, 1024)}
	for r := 0; r < n; r++ {
		args := append(slices.Clone(opts), mode, fmt.Sprint(r), fmt.Sprint(hMs), fmt.Sprint(deltaMs),
			explicitJob, "00112233445566778899aabbccddeeff")
		args = append(args, addrs...)
		cmd := exec.Command(bin, args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p.cmds = append(p.cmds, cmd)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var l cLine
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					t.Errorf("rank %d printed %q: %v", r, sc.Text(), err)
					continue
				}
				p.lines <- l
			}
			cmd.Wait()
		}()
	}
	t.Cleanup(func() {
		for _, c := range p.cmds {
			c.Process.Kill()
		}
		p.wg.Wait()
	})
	return p
}

func (p *procs) next(deadline <-chan time.Time, what string) cLine {
	p.t.Helper()
	select {
	case l := <-p.lines:
		return l
	case <-deadline:
		p.t.Fatalf("timed out waiting for %s", what)
	}
	panic("unreachable")
}

// killAndExpect waits for every rank's ready line, kills victim, and
// checks that every survivor reports it (and nothing else) and says bye on
// SIGTERM with the victim in its dead set.
func (p *procs) killAndExpect(victim int) {
	t := p.t
	n := len(p.cmds)
	deadline := time.After(30 * time.Second)
	for ready := 0; ready < n; {
		switch l := p.next(deadline, "ready lines"); l.Ev {
		case "ready":
			ready++
		case "dead", "evicted":
			t.Errorf("before any failure: %+v", l)
		}
	}
	time.Sleep(300 * time.Millisecond)
	p.cmds[victim].Process.Signal(syscall.SIGKILL)
	got := map[uint32]bool{}
	for len(got) < n-1 {
		l := p.next(deadline, fmt.Sprintf("the survivors' reports of rank %d (have %v)", victim, got))
		switch {
		case l.Ev == "dead" && l.Dead == uint32(victim) && !l.Left:
			got[l.Rank] = true
		case l.Ev == "dead" || l.Ev == "evicted":
			t.Errorf("unexpected line: %+v", l)
		}
	}
	for r, c := range p.cmds {
		if r != victim {
			c.Process.Signal(syscall.SIGTERM)
		}
	}
	for byes := 0; byes < n-1; {
		l := p.next(deadline, "bye lines")
		if l.Ev == "bye" {
			byes++
			// The victim, and maybe survivors that left before this one.
			if !slices.Contains(l.DeadSet, uint32(victim)) {
				t.Errorf("rank %d's dead set %v lacks rank %d", l.Rank, l.DeadSet, victim)
			}
		} else if l.Ev == "dead" && !l.Left {
			t.Errorf("while leaving: %+v", l)
		}
	}
}

func TestCExplicitRing(t *testing.T) {
	bin := compileC(t, lib(t, ""), "examples/explicit.c", false)
	startExplicit(t, bin, "ring", 4, 20, 1000).killAndExpect(1)
}

func TestCExplicitSporadic(t *testing.T) {
	bin := compileC(t, lib(t, ""), "examples/explicit.c", false)
	startExplicit(t, bin, "sporadic", 3, 20, 1000).killAndExpect(2)
}

// TestCDetectLocalLauncher runs detect.c under Vigil's local launcher
// (vigil_init_from_env without PMIx).
func TestCDetectLocalLauncher(t *testing.T) { detectLocal(t, 4, []uint32{0}) }

// TestCDetectPretendedHostCrash: under the local launcher with pretended
// hosts of 2 ranks (VIGIL_RANKS_PER_HOST, which libvigil passes on as host
// labels), host 1 is killed as a block and every survivor reports both of
// its ranks, and nothing else.
func TestCDetectPretendedHostCrash(t *testing.T) {
	detectLocal(t, 4, []uint32{2, 3}, bootstrap.EnvRanksPerHost+"=2")
}

// detectLocal runs n ranks of detect.c under the local launcher, kills the
// victims at once with SIGKILL, and checks that every survivor reports each
// of them, and nothing else.
func detectLocal(t *testing.T, n int, victims []uint32, env ...string) {
	job, ctx := startDetect(t, n, append([]string{"VIGIL_DELTA=1s"}, env...)...)
	for _, v := range victims {
		job.Signal(v, syscall.SIGKILL)
	}
	type report struct{ rank, dead uint32 }
	got := map[report]bool{}
	for len(got) < (n-len(victims))*len(victims) {
		select {
		case l, ok := <-job.Lines:
			if !ok {
				t.Fatal("the job's output ended")
			}
			if l.Ev == "dead" && slices.Contains(victims, l.Dead) && !slices.Contains(victims, l.Rank) && !l.Left {
				got[report{l.Rank, l.Dead}] = true
			} else if l.Ev == "dead" && !slices.Contains(victims, l.Rank) {
				t.Errorf("unexpected report %+v", l)
			}
		case <-ctx.Done():
			t.Fatalf("survivors reporting ranks %v: %v", victims, got)
		}
	}
}

// TestCDetectMostRanksLost: 3 of 4 ranks of detect.c are killed at once.
// The survivor, holding most of the job dead, reports the three, then
// VIGIL_EVENT_MINORITY (detect.c prints an evicted line with reason
// "minority partition"); with VIGIL_PARTITION=continue it reports the
// three and goes on (no evicted line within 10δ).
func TestCDetectMostRanksLost(t *testing.T) {
	for _, mode := range []string{"failstop", "continue"} {
		t.Run(mode, func(t *testing.T) {
			const delta = 200 * time.Millisecond
			job, ctx := startDetect(t, 4, "VIGIL_DELTA="+delta.String(), "VIGIL_PARTITION="+mode)
			for _, v := range []uint32{1, 2, 3} {
				job.Signal(v, syscall.SIGKILL)
			}
			var dead []uint32
			quiet := time.After(time.Hour)
			for {
				select {
				case l, ok := <-job.Lines:
					switch {
					case !ok:
						t.Fatal("the job's output ended")
					case l.Rank != 0:
					case l.Ev == "dead":
						dead = append(dead, l.Dead)
						if len(dead) == 3 && mode == "continue" {
							quiet = time.After(10 * delta)
						}
					case l.Ev == "evicted" && mode == "failstop":
						if slices.Sort(dead); !slices.Equal(dead, []uint32{1, 2, 3}) || l.Reason != launch.ReasonMinority {
							t.Fatalf("rank 0 stopped with reason %q having reported %v; want %q after [1 2 3]", l.Reason, dead, launch.ReasonMinority)
						}
						return
					case l.Ev == "evicted":
						t.Fatalf("rank 0 stopped (%+v) under VIGIL_PARTITION=continue", l)
					}
				case <-quiet:
					return
				case <-ctx.Done():
					t.Fatalf("rank 0 reported %v and did not stop", dead)
				}
			}
		})
	}
}

// startDetect runs n ranks of detect.c under the local launcher (h = 20
// ms, env after), stopped when the test ends, and returns once all are
// ready and 300 ms more have passed, with a context that ends 60 s after
// the start.
func startDetect(t *testing.T, n int, env ...string) (*launch.Job, context.Context) {
	bin := compileC(t, lib(t, ""), "examples/detect.c", false)
	job, err := launch.Start(n, []string{bin}, launch.Options{
		ExtraEnv: append([]string{"VIGIL_H=20ms", "PMIX_RANK=", "PMIX_NAMESPACE="}, env...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Stop(5 * time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	if _, err := job.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	return job, ctx
}

// TestCDetectNoPMIx: a libvigil built without the pmix tag, started with a
// PMIx environment where the PMIx library cannot be loaded, fails with
// VIGIL_ERR_NO_PMIX and says what to install.
func TestCDetectNoPMIx(t *testing.T) {
	bin := compileC(t, lib(t, ""), "examples/detect.c", false)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PMIX_RANK=0", "PMIX_NAMESPACE=x", "VIGIL_BOOTSTRAP=", "VIGIL_LIBPMIX=/nonexistent/libpmix.so.2")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot load the PMIx library") || !strings.Contains(string(out), "apt-get install libpmix2") ||
		!strings.Contains(string(out), "(-4)") {
		t.Fatalf("detect with PMIx variables and no PMIx library: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestCDetectUnderMpirun is the C ABI end-to-end test: detect.c linked
// with libvigil (built with -tags pmix) runs as 5 ranks under mpirun; one
// is killed and every survivor's callback must report it, on the library's
// callback thread; polling must see it too.
func TestCDetectUnderMpirun(t *testing.T) {
	mpitest.Need(t)
	bin := compileC(t, lib(t, "pmix"), "examples/detect.c", false)
	const n, victim = 5, 2
	j := mpitest.Start(t, n, []string{"VIGIL_H=20ms", "VIGIL_DELTA=1s"}, nil, bin)
	deadline := time.After(90 * time.Second)
	decode := func(l mpitest.Line) cLine {
		var c cLine
		if err := json.Unmarshal([]byte(l.Text), &c); err != nil {
			t.Fatalf("rank %d printed %q: %v", l.Rank, l.Text, err)
		}
		return c
	}
	for ready := 0; ready < n; {
		if decode(j.Next(deadline, "ready lines")).Ev == "ready" {
			ready++
		}
	}
	pids := j.WaitPIDs(n, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	syscall.Kill(pids[victim], syscall.SIGKILL)
	got := map[uint32]bool{}
	for len(got) < n-1 {
		c := decode(j.Next(deadline, fmt.Sprintf("the survivors' callbacks for rank %d (have %v)", victim, got)))
		switch {
		case c.Ev == "dead" && c.Dead == victim:
			if c.Left || c.CBThread != "own" {
				t.Errorf("rank %d: left=%v cb_thread=%q; want a crash reported on the callback thread", c.Rank, c.Left, c.CBThread)
			}
			got[c.Rank] = true
		case c.Ev == "dead" || c.Ev == "evicted":
			t.Logf("other report (a loaded machine?): %+v", c)
		}
	}
	if !j.Terminate(30 * time.Second) {
		t.Fatalf("mpirun did not exit on SIGTERM\n%s", j.Stderr())
	}
	byes := 0
	for l := range j.Lines() {
		if c := decode(l); c.Ev == "bye" {
			byes++
			if c.Polled < 1 || !slices.Contains(c.DeadSet, victim) {
				t.Errorf("rank %d: polled %d events, dead set %v; want the victim in both", c.Rank, c.Polled, c.DeadSet)
			}
		}
	}
	if byes != n-1 {
		t.Errorf("%d survivors said bye, want %d", byes, n-1)
	}
}
