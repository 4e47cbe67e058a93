package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests of `vigil run -- PROGRAM`: the Go and the C example programs
// launched as the README shows, a rank killed with kill -9.

// repoRoot is the module's root, from this package's directory.
const repoRoot = "../.."

// TestE2ERunProgramGo: `vigil run -n 4 -- ./gowatch` with the Go example
// (examples/gowatch): a rank killed with kill -9 is printed by the three
// others, vigil run reports it with its pid and the time, and exits 4
// naming it.
func TestE2ERunProgramGo(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gowatch")
	cmd := exec.Command("go", "build", "-o", bin, "./examples/gowatch")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/gowatch: %v\n%s", err, out)
	}
	// δ = 1 s: four processes and the test share two loaded cores.
	runAndKill(t, nil, regexp.MustCompile(`^rank (\d+) of 4: pid \d+ ready$`),
		regexp.MustCompile(`^rank (\d+): rank 2 died \(found by rank \d+\)$`), regexp.MustCompile(`died`),
		bin, "-h", "50ms", "-delta", "1s")
}

// TestE2ERunProgramC: the same with the C example (csrc/examples/detect.c
// against libvigil.so), configured through the environment.
func TestE2ERunProgramC(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("gcc is not installed (%v): this test compiles the C example", err)
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "libvigil.so"), "./capi")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildmode=c-shared ./capi: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "detect")
	cc := exec.Command(gcc, "-O1", "-Wall", "-Wextra", "-Werror", "-Icsrc", "-o", bin, "csrc/examples/detect.c",
		"-L"+dir, "-lvigil", "-Wl,-rpath,"+dir)
	cc.Dir = repoRoot
	if out, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("gcc detect.c: %v\n%s", err, out)
	}
	runAndKill(t, []string{"VIGIL_H=50ms", "VIGIL_DELTA=1s"}, regexp.MustCompile(`^\{"ev":"ready","rank":(\d+),"size":4,`),
		regexp.MustCompile(`^\{"ev":"dead","rank":(\d+),"dead":2,"left":false,`), regexp.MustCompile(`^\{"ev":"dead","rank":\d+,"dead":\d+,"left":false,`),
		bin)
}

// runLine is a line vigil run or its ranks printed.
type runLine struct {
	stderr bool
	text   string
}

// runAndKill runs `vigil run -n 4 -- argv...` (env added to its
// environment), kills rank 2 with SIGKILL once every rank printed a line
// matching up (its rank first), and waits for vigil run's report of it
// (time, pid) and for the three others to print a line matching dead (the
// reporter's rank first); any other line matching anyDead (a crash, not
// a departure) fails the test: a live rank reported dead. Then SIGTERM to vigil run: it forwards it,
// the survivors leave and exit 0, and vigil run exits 4, its last line
// naming rank 2 alone.
func runAndKill(t *testing.T, env []string, up, dead, anyDead *regexp.Regexp, argv ...string) {
	t.Helper()
	cmd := exec.Command(vigilBin, append([]string{"run", "-n", "4", "--"}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited { // the ranks die with it (launch sets their parent-death signal)
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	lines := make(chan runLine, 256)
	var wg sync.WaitGroup
	for _, p := range []struct {
		r      io.Reader
		stderr bool
	}{{stdout, false}, {stderr, true}} {
		wg.Go(func() {
			for sc := bufio.NewScanner(p.r); sc.Scan(); {
				lines <- runLine{p.stderr, sc.Text()}
			}
		})
	}
	go func() { wg.Wait(); close(lines) }()

	table := regexp.MustCompile(`^ +(\d+) +(\d+)$`)
	pids, ups, reporters := map[int]int{}, map[int]bool{}, map[int]bool{}
	var all []runLine
	deadline := time.After(60 * time.Second)
	// next returns the next line, failing the test at the deadline or if
	// a live rank is reported dead.
	next := func(what string) (runLine, bool) {
		select {
		case l, ok := <-lines:
			if ok {
				t.Logf("%s", l.text)
				all = append(all, l)
				if !l.stderr && anyDead.MatchString(l.text) {
					if m := dead.FindStringSubmatch(l.text); m == nil {
						t.Fatalf("a live rank was reported dead: %s", l.text)
					} else {
						reporters[atoi(t, m[1])] = true
					}
				}
			}
			return l, ok
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
			return runLine{}, false
		}
	}
	for len(pids) < 4 || len(ups) < 4 {
		l, ok := next("the rank → pid table and every rank up")
		if !ok {
			t.Fatal("vigil run ended before every rank was up")
		}
		if m := table.FindStringSubmatch(l.text); l.stderr && m != nil {
			pids[atoi(t, m[1])] = atoi(t, m[2])
		}
		if m := up.FindStringSubmatch(l.text); !l.stderr && m != nil {
			ups[atoi(t, m[1])] = true
		}
	}
	if err := syscall.Kill(pids[2], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	report := regexp.MustCompile(`^\[\+\d+\.\d{3}s\] vigil run: rank 2 \(pid ` + strconv.Itoa(pids[2]) + `\) killed by SIGKILL$`)
	reported := false
	for !reported || len(reporters) < 3 {
		l, ok := next("rank 2's death reported by vigil run and the three others")
		if !ok {
			t.Fatal("vigil run ended before rank 2's death was reported")
		}
		reported = reported || (l.stderr && report.MatchString(l.text))
	}
	if reporters[2] {
		t.Fatal("rank 2 reported its own death")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		if _, ok := next("vigil run to end after SIGTERM"); !ok {
			break
		}
	}
	err = cmd.Wait()
	exited = true
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != exitRanksKilled {
		t.Errorf("vigil run: %v (exit %d), want exit %d (a rank killed by a signal)", err, code, exitRanksKilled)
	}
	var last string
	for _, l := range all {
		if l.stderr {
			last = l.text
		}
	}
	if want := fmt.Sprintf("vigil run: 1 of 4 ranks died: rank 2 (pid %d) killed by SIGKILL", pids[2]); last != want {
		t.Errorf("vigil run's last line %q, want %q", last, want)
	}
	for _, r := range []int{0, 1, 3} {
		want := fmt.Sprintf("vigil run: rank %d (pid %d) exited with status 0", r, pids[r])
		if !containsLine(all, want) {
			t.Errorf("no line ending %q", want)
		}
	}
}

// containsLine reports whether a line of vigil run's ends with suffix.
func containsLine(lines []runLine, suffix string) bool {
	for _, l := range lines {
		if l.stderr && strings.HasSuffix(l.text, suffix) {
			return true
		}
	}
	return false
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestE2ERunProgramExitStatus: vigil run's exit status and last line say
// how the ranks ended: 0 when all exited with status 0, 3 naming the ranks
// that exited with another status; the program sees its rank and the
// bootstrap's variables.
func TestE2ERunProgramExitStatus(t *testing.T) {
	out, err := exec.Command(vigilBin, "run", "-n", "3", "--", "sh", "-c", `test -n "$VIGIL_BOOTSTRAP" && echo "rank $VIGIL_RANK of $VIGIL_SIZE"`).CombinedOutput()
	if err != nil {
		t.Fatalf("vigil run -- sh: %v\n%s", err, out)
	}
	for r := range 3 {
		if !strings.Contains(string(out), fmt.Sprintf("rank %d of 3\n", r)) {
			t.Errorf("rank %d did not print its rank:\n%s", r, out)
		}
	}
	out, err = exec.Command(vigilBin, "run", "-n", "3", "--", "sh", "-c", `exit $((VIGIL_RANK % 2 * 7))`).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitRanksFailed {
		t.Fatalf("vigil run -- sh -c 'exit ...': %v, want exit %d\n%s", err, exitRanksFailed, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if last := lines[len(lines)-1]; !regexp.MustCompile(`^vigil run: 1 of 3 ranks died: rank 1 \(pid \d+\) exited with status 7$`).MatchString(last) {
		t.Errorf("last line %q, want rank 1 alone, with its pid and status", last)
	}
}
