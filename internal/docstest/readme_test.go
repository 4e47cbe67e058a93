package docstest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/mpitest"
)

// scenario runs (or checks) one marked block of the README in tr and
// asserts what the README says it does.
type scenario func(t *testing.T, tr *tree, b Block)

// scenarios are the README's blocks by marker name. A block without a
// scenario, or a scenario without its block, fails TestREADME.
var scenarios = map[string]scenario{
	"install":   checkInstall,
	"setup":     runSetup,
	"c-mpirun":  killRank(4, 2, "mpirun"),
	"c-hosts":   runAcrossHosts,
	"c-srun":    notRun, // untested=...: only parsed
	"go-mpirun": killRank(4, 2, "mpirun"),
	"go-run":    killRank(4, 2, "vigil run"),
	"daemon":    runDaemons,
	"metrics":   runMetrics,
}

// Attributes a marker may carry.
const (
	// attrUntested gives the reason a block is not run (it is only
	// parsed by bash -n).
	attrUntested = "untested"
	// attrPending names the change a block waits for; the only one known
	// is "launch", `vigil run -- PROGRAM`. The block is not run until the
	// change is there, and fails once it is there and the attribute is
	// still set.
	attrPending = "pending"
)

// The watch programs' lines (csrc/examples/watch.c, examples/gowatch).
var (
	readyRE = regexp.MustCompile(`(?m)^rank (\d+) of (\d+): pid (\d+) ready$`)
	diedRE  = regexp.MustCompile(`(?m)^rank (\d+): rank (\d+) died \(found by rank \d+\)$`)
)

// TestREADME runs every quick start of README.md as written, in order, in
// a copy of the repository, and checks what the README says they print.
func TestREADME(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := Extract(string(doc))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	var names []string
	for _, b := range blocks {
		names = append(names, b.Name)
		if _, ok := scenarios[b.Name]; !ok {
			t.Errorf("README.md line %d: block %q has no scenario in internal/docstest", b.Line, b.Name)
		}
		for k := range b.Attrs {
			if k != attrUntested && k != attrPending {
				t.Errorf("README.md line %d: block %q: unknown attribute %q", b.Line, b.Name, k)
			}
		}
	}
	for name := range scenarios {
		if !slices.Contains(names, name) {
			t.Errorf("scenario %q has no block marked for it in README.md", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	tr := copyTree(t, root)
	t0 := time.Now()
	for _, b := range blocks {
		t.Run(b.Name, func(t *testing.T) {
			start := time.Now()
			defer func() { t.Logf("block %q took %v", b.Name, time.Since(start).Round(100*time.Millisecond)) }()
			if out, err := exec.Command("bash", "-n", "-c", b.Text).CombinedOutput(); err != nil {
				t.Fatalf("README.md line %d: bash -n: %v\n%s", b.Line, err, out)
			}
			if why, ok := b.Attrs[attrUntested]; ok {
				t.Skipf("README.md line %d: not run in CI (%s); its shell syntax is checked", b.Line, why)
			}
			if p, ok := b.Attrs[attrPending]; ok {
				pending(t, tr, b, p)
			}
			scenarios[b.Name](t, tr, b)
		})
	}
	t.Logf("README.md: %d blocks in %v", len(blocks), time.Since(t0).Round(100*time.Millisecond))
}

// notRun is the scenario of a block that CI cannot run (it must be marked
// untested, which skips it before its scenario).
func notRun(t *testing.T, _ *tree, b Block) {
	t.Fatalf("README.md line %d: block %q cannot run in CI: mark it untested=\"why\"", b.Line, b.Name)
}

// pending skips a block that waits for a change not there yet, and fails
// one whose change is there while the marker still says pending.
func pending(t *testing.T, tr *tree, b Block, what string) {
	t.Helper()
	if what != "launch" {
		t.Fatalf("README.md line %d: pending=%q: only pending=launch is known", b.Line, what)
	}
	vigil := filepath.Join(tr.dir, "bin", "vigil")
	if _, err := os.Stat(vigil); err != nil {
		t.Fatalf("README.md line %d: %s is not built (the setup block builds it): %v", b.Line, vigil, err)
	}
	cmd := exec.Command(vigil, "run", "-n", "1", "-t", "3s", "--", "sh", "-c", "echo launched-$VIGIL_RANK")
	cmd.Dir, cmd.Env = tr.dir, tr.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	done := make(chan struct{})
	time.AfterFunc(30*time.Second, func() {
		select {
		case <-done:
		default:
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	out, _ := cmd.CombinedOutput()
	close(done)
	if strings.Contains(string(out), "launched-0") {
		t.Fatalf("README.md line %d: `vigil run -- PROGRAM` works now: remove pending=launch from the block's marker", b.Line)
	}
	t.Skipf("README.md line %d: pending=launch: `vigil run -n 1 -- sh -c ...` did not start the program (output %q); the block runs once the launcher can", b.Line, strings.TrimSpace(string(out)))
}

// checkInstall checks the install block without running it (it needs sudo
// and the network): every package it names is installed on this machine
// and installed by scripts/deps.sh, so that CI's machine is the one the
// README describes, and the Go version it asks for is go.mod's.
func checkInstall(t *testing.T, tr *tree, b Block) {
	var pkgs []string
	goVersion := ""
	for _, l := range strings.Split(b.Text, "\n") {
		f := strings.Fields(l)
		if i := slices.Index(f, "install"); i > 0 && f[i-1] == "apt-get" {
			for _, p := range f[i+1:] {
				if !strings.HasPrefix(p, "-") {
					pkgs = append(pkgs, p)
				}
			}
		}
		if m := regexp.MustCompile(`^go version\s+#\s*go(1\.\d+) or later\b`).FindStringSubmatch(l); m != nil {
			goVersion = m[1]
		}
	}
	if len(pkgs) == 0 || goVersion == "" {
		t.Fatalf("README.md line %d: want an `apt-get install PACKAGES` line and `go version   # go1.N or later`:\n%s", b.Line, b.Text)
	}
	deps, err := os.ReadFile(filepath.Join(tr.dir, "scripts", "deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	depsPkgs := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*pkgs\+?=\(([^)]*)\)`).FindAllStringSubmatch(string(deps), -1) {
		for _, p := range strings.Fields(m[1]) {
			depsPkgs[p] = true
		}
	}
	for _, p := range pkgs {
		if !depsPkgs[p] {
			t.Errorf("README installs %s, which scripts/deps.sh does not", p)
		}
		out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", p).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "install ok installed") {
			t.Errorf("README installs %s: not installed here (%v: %s)", p, err, out)
		}
	}
	mod, err := os.ReadFile(filepath.Join(tr.dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (1\.\d+)`).FindSubmatch(mod)
	if m == nil || string(m[1]) != goVersion {
		t.Errorf("README asks for go%s or later; go.mod says %q", goVersion, m)
	}
	out, err := exec.Command("go", "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "go"+goVersion) && !newerGo(string(out), goVersion) {
		t.Errorf("go version: %v: %s (the README asks for go%s or later)", err, out, goVersion)
	}
	t.Logf("checked, not run: %d packages installed and in scripts/deps.sh (%s); go.mod's go %s", len(pkgs), strings.Join(pkgs, " "), goVersion)
}

// newerGo reports whether `go version` output names a Go at least want
// ("1.26").
func newerGo(out, want string) bool {
	m := regexp.MustCompile(`go1\.(\d+)`).FindStringSubmatch(out)
	w, _ := strconv.Atoi(strings.TrimPrefix(want, "1."))
	if m == nil {
		return false
	}
	got, _ := strconv.Atoi(m[1])
	return got >= w
}

// runSetup runs the set-up block's `make demo` and checks that its
// `make test` is what CI runs (.ci/run), which is how it runs.
func runSetup(t *testing.T, tr *tree, b Block) {
	var cmds []string
	for _, l := range strings.Split(b.Text, "\n") {
		if c, _, _ := strings.Cut(l, "#"); strings.TrimSpace(c) != "" {
			cmds = append(cmds, strings.Join(strings.Fields(c), " "))
		}
	}
	if !slices.Equal(cmds, []string{"make demo", "make test"}) {
		t.Fatalf("README.md line %d: the set-up commands are %q, want make demo and make test", b.Line, cmds)
	}
	ci, err := os.ReadFile(filepath.Join(tr.dir, ".ci", "run"))
	if err != nil || !regexp.MustCompile(`(?m)^exec make test$`).Match(ci) {
		t.Fatalf(".ci/run does not run `make test` (%v):\n%s", err, ci)
	}
	demo := b
	demo.Text = "make demo\n"
	s := tr.start(t, demo, nil)
	if err := s.wait(5 * time.Minute); err != nil {
		t.Fatalf("make demo: %v\n%s", err, s.Output())
	}
	if !regexp.MustCompile(`(?m)^OK`).MatchString(s.Output()) {
		t.Fatalf("make demo exited 0 without its OK line:\n%s", s.Output())
	}
	t.Logf("make demo: %s", lastLine(s.Output()))
}

// killRank runs a block that starts n ranks of a watch program under
// launcher, kills rank victim and stops the job, and checks that it ran
// to its end and that every survivor, and nothing else, reported the
// victim.
func killRank(n, victim int, launcher string) scenario {
	return func(t *testing.T, tr *tree, b Block) {
		s := tr.start(t, b, nil)
		err := s.wait(3 * time.Minute)
		out := s.Output()
		if err != nil {
			t.Fatalf("the block failed: %v\n%s", err, out)
		}
		ready := map[int]bool{}
		for _, m := range lines(out, readyRE) {
			r, _ := strconv.Atoi(m[1])
			ready[r] = true
			if m[2] != strconv.Itoa(n) {
				t.Errorf("rank %d says the job has %s ranks, want %d", r, m[2], n)
			}
		}
		if len(ready) != n {
			t.Fatalf("%d ranks ready, want %d:\n%s", len(ready), n, out)
		}
		reports := map[[2]int]int{}
		for _, m := range lines(out, diedRE) {
			r, _ := strconv.Atoi(m[1])
			d, _ := strconv.Atoi(m[2])
			reports[[2]int{r, d}]++
		}
		for r := range n {
			if r != victim && reports[[2]int{r, victim}] != 1 {
				t.Errorf("survivor %d reported rank %d %d times, want once", r, victim, reports[[2]int{r, victim}])
			}
		}
		for k, c := range reports {
			if k[1] != victim || k[0] == victim {
				t.Errorf("rank %d reported rank %d died %d times: only rank %d was killed", k[0], k[1], c, victim)
			}
		}
		if !strings.Contains(out, launcher+" exited with status") {
			t.Errorf("no %q line: the %s did not report the killed rank in its exit status", launcher+" exited with status", launcher)
		}
		if t.Failed() {
			t.Logf("the block's output:\n%s", out)
			return
		}
		t.Logf("%d ranks, rank %d killed, reported once by each of the %d survivors; %s", n, victim, n-1, lastMatch(out, launcher+" exited"))
	}
}

// runAcrossHosts runs the across-hosts block on four network-namespace
// hosts named node1 to node4 (the names resolve there through a hosts
// file mounted over /etc/hosts in a mount namespace of the block's own,
// and mpirun reaches the hosts through mpitest's launcher agent, set with
// OMPI_MCA_ variables as a site's configuration would be). It kills one
// rank, then node3 (its link cut first, as a power-off leaves no TCP reset
// behind), checks that every survivor reports exactly the dead, then
// interrupts mpirun as Ctrl-C would and checks that it exits.
func runAcrossHosts(t *testing.T, tr *tree, b Block) {
	const nh, ppn = 4, 4
	const n, victim, deadHost = nh * ppn, 5, 2 // rank 5 on node2 (--map-by node); node3
	hosts := mpitest.NewHostsWith(t, nh, mpitest.HostsOptions{Names: []string{"node1", "node2", "node3", "node4"}})
	hostsFile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostsFile, []byte("127.0.0.1 localhost\n"+hosts.HostsFile()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := tr.start(t, b, hosts.Env(), "unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" /etc/hosts && exec "$@"`, hostsFile)
	t.Cleanup(func() {
		for i := range nh {
			hosts.Kill(i) // before the block's shell is killed: the ranks sit in process groups of their own
		}
	})
	s.await("16 ranks ready", 90*time.Second, func(out string) string {
		if c := len(lines(out, readyRE)); c < n {
			return fmt.Sprintf("%d of %d ranks ready", c, n)
		}
		return ""
	})
	pids, hostOf := hosts.WaitPIDs(n, 10*time.Second)
	if hostOf[victim] == deadHost {
		t.Fatalf("rank %d runs on %s: the test wants it elsewhere", victim, hosts.HostName(deadHost))
	}
	// Past the start-up grace (2 s + δ, δ = 50 ms by default).
	time.Sleep(3 * time.Second)

	dead := map[int]bool{victim: true}
	if err := syscall.Kill(pids[victim], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.await(fmt.Sprintf("the survivors to report rank %d", victim), 30*time.Second, func(out string) string {
		return missing(out, n, dead)
	})
	t0 := time.Now()
	hosts.LinkDown(deadHost)
	hosts.Kill(deadHost)
	var onDead []int
	for r, h := range hostOf {
		if h == deadHost {
			dead[r] = true
			onDead = append(onDead, r)
		}
	}
	slices.Sort(onDead)
	s.await(fmt.Sprintf("the survivors to report %s's ranks %v", hosts.HostName(deadHost), onDead), 30*time.Second, func(out string) string {
		return missing(out, n, dead)
	})
	took := time.Since(t0)
	time.Sleep(500 * time.Millisecond) // a false report would come now
	out := s.Output()
	if why := wrongReports(out, dead); why != "" {
		t.Fatalf("%s\n%s", why, out)
	}
	t.Logf("rank %d killed, then %s (ranks %v) cut off and killed: every one of the %d survivors reported exactly the %d dead (%v after the host's kill)",
		victim, hosts.HostName(deadHost), onDead, n-len(dead), len(dead), took.Round(10*time.Millisecond))

	// Ctrl-C: the ranks leave; mpirun, which still waits for node3's
	// daemon, asks for a second Ctrl-C within 5 s, as the README says.
	t1 := time.Now()
	s.signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(2 * time.Second):
		s.signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("mpirun did not exit within 30 s of a second Ctrl-C with %s dead: %s\n%s", hosts.HostName(deadHost), psTree(s.cmd.Process.Pid), s.Output())
		}
	}
	t.Logf("mpirun exited %v after the first Ctrl-C (%v)", time.Since(t1).Round(10*time.Millisecond), s.err)
	// Nothing of the job is left on the hosts that survived.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var left []int
		for i := range nh {
			left = append(left, hosts.PIDs(i)...)
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("processes %v are left on the hosts 10 s after mpirun exited: %s", left, psList(left))
		}
	}
}

// psTree describes pid and its descendants.
func psTree(pid int) string { return psList(append([]int{pid}, mpitest.Descendants(pid)...)) }

// psList describes the processes pids.
func psList(pids []int) string {
	var b strings.Builder
	for _, p := range pids {
		c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		fmt.Fprintf(&b, "\n  %d %s", p, strings.ReplaceAll(string(c[:min(len(c), 120)]), "\x00", " "))
	}
	return b.String()
}

// missing returns a survivor that has not reported every dead rank, or "".
func missing(out string, n int, dead map[int]bool) string {
	got := map[[2]int]bool{}
	for _, m := range lines(out, diedRE) {
		r, _ := strconv.Atoi(m[1])
		d, _ := strconv.Atoi(m[2])
		got[[2]int{r, d}] = true
	}
	for r := range n {
		if dead[r] {
			continue
		}
		for d := range dead {
			if !got[[2]int{r, d}] {
				return fmt.Sprintf("survivor %d has not reported rank %d", r, d)
			}
		}
	}
	return ""
}

// wrongReports describes reports of live ranks, or reports made twice.
func wrongReports(out string, dead map[int]bool) string {
	seen := map[[2]int]bool{}
	for _, m := range lines(out, diedRE) {
		r, _ := strconv.Atoi(m[1])
		d, _ := strconv.Atoi(m[2])
		if !dead[d] {
			return fmt.Sprintf("rank %d reported live rank %d", r, d)
		}
		if seen[[2]int{r, d}] {
			return fmt.Sprintf("rank %d reported rank %d twice", r, d)
		}
		seen[[2]int{r, d}] = true
	}
	return ""
}

// runDaemons runs the daemon block: both daemons report the killed
// application process of node 1, and nothing else fails.
func runDaemons(t *testing.T, tr *tree, b Block) {
	s := tr.start(t, b, nil)
	err := s.wait(2 * time.Minute)
	out := s.Output()
	if err != nil {
		t.Fatalf("the block failed: %v\n%s", err, out)
	}
	procRE := regexp.MustCompile(`(?m)^\{"v":1,"ev":"proc","rank":(\d+),"node":1,"cause":"crashed",.*"self":(\d+)\}$`)
	self := map[string]int{}
	for _, m := range lines(out, procRE) {
		if m[1] != "2" && m[1] != "3" {
			t.Errorf("a process of rank %s reported on node 1, which runs ranks 2 and 3", m[1])
		}
		self[m[2]]++
	}
	if self["0"] != 1 || self["1"] != 1 {
		t.Fatalf("want one crashed process of node 1 reported by each daemon, got %v:\n%s", self, out)
	}
	if c := strings.Count(out, `"ev":"`); c != 4 {
		t.Fatalf("want 4 lines (2 ready, 2 proc), got %d:\n%s", c, out)
	}
	t.Logf("both daemons reported the crashed process")
}

// runMetrics runs the metrics block: the counters it greps are printed,
// and heartbeats were sent.
func runMetrics(t *testing.T, tr *tree, b Block) {
	s := tr.start(t, b, nil)
	err := s.wait(2 * time.Minute)
	out := s.Output()
	if err != nil {
		t.Fatalf("the block failed: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^vigil_heartbeats_sent_total (\d+)$`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" {
		t.Fatalf("no heartbeats counted:\n%s", out)
	}
	for _, name := range []string{"vigil_heartbeat_deadlines_missed_total", "vigil_deaths_learned_total"} {
		if !regexp.MustCompile(`(?m)^` + name + ` \d+$`).MatchString(out) {
			t.Errorf("%s not printed:\n%s", name, out)
		}
	}
	t.Logf("metrics: %s heartbeats sent", m[1])
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}

// lastMatch returns the last line of s containing sub.
func lastMatch(s, sub string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			last = sc.Text()
		}
	}
	return last
}
