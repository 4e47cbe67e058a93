package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/mpitest"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
)

var pmixBuild struct {
	once sync.Once
	bin  string
	err  error
}

// pmixVigil builds vigil with the PMIx bootstrap, once per test binary.
func pmixVigil(t *testing.T) string {
	t.Helper()
	pmixBuild.once.Do(func() {
		pmixBuild.bin = vigilBin + "-pmix"
		if out, err := exec.Command("go", "build", "-tags", "pmix", "-o", pmixBuild.bin, ".").CombinedOutput(); err != nil {
			pmixBuild.err = fmt.Errorf("go build -tags pmix: %v\n%s", err, out)
		}
	})
	if pmixBuild.err != nil {
		t.Fatal(pmixBuild.err)
	}
	return pmixBuild.bin
}

// mhJob gathers the lines of a multi-host mpirun job of agents.
type mhJob struct {
	t       *testing.T
	j       *mpitest.Job
	mu      sync.Mutex
	ready   map[uint32]launch.Line
	dead    map[uint32]map[uint32]launch.Line // reporter → dead rank → line
	evicted map[uint32]bool
	stops   map[uint32]launch.Line // each rank's evicted line
}

func newMHJob(t *testing.T, j *mpitest.Job) *mhJob {
	m := &mhJob{t: t, j: j, ready: map[uint32]launch.Line{}, dead: map[uint32]map[uint32]launch.Line{}, evicted: map[uint32]bool{},
		stops: map[uint32]launch.Line{}}
	go func() {
		for l := range j.Lines() {
			var ln launch.Line
			if err := json.Unmarshal([]byte(l.Text), &ln); err != nil || int(ln.Rank) != l.Rank {
				t.Errorf("mpirun rank %d printed %q (%v)", l.Rank, l.Text, err)
				continue
			}
			m.mu.Lock()
			switch ln.Ev {
			case "ready":
				m.ready[ln.Rank] = ln
			case "dead":
				if m.dead[ln.Rank] == nil {
					m.dead[ln.Rank] = map[uint32]launch.Line{}
				}
				m.dead[ln.Rank][ln.Dead] = ln
			case "evicted":
				m.evicted[ln.Rank] = true
				m.stops[ln.Rank] = ln
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// await polls cond (under the lock) until it returns "" or the timeout;
// cond returns what is still missing.
func (m *mhJob) await(what string, timeout time.Duration, cond func() string) {
	m.t.Helper()
	awaitJob(m.t, &m.mu, m.j, what, timeout, cond)
}

// awaitReady waits up to 60 s for the ready lines of n ranks.
func (m *mhJob) awaitReady(n int) {
	m.t.Helper()
	m.await("start", 60*time.Second, func() string {
		if len(m.ready) < n {
			return fmt.Sprintf("%d of %d ranks ready", len(m.ready), n)
		}
		return ""
	})
}

// awaitJob polls cond under mu every 20 ms until it returns "" (cond says
// what is still missing), failing t at the timeout or if mpirun exits.
func awaitJob(t *testing.T, mu *sync.Mutex, j *mpitest.Job, what string, timeout time.Duration, cond func() string) {
	t.Helper()
	missing, exited := pollJob(mu, j, timeout, cond)
	if exited {
		t.Fatalf("%s: mpirun exited (%v) while %s\nstderr:\n%s", what, j.Cmd.ProcessState, missing, j.Stderr())
	}
	if missing != "" {
		t.Fatalf("%s: after %v, %s\nstderr:\n%s", what, timeout, missing, j.Stderr())
	}
}

// pollJob polls cond under mu every 20 ms until it returns "", the timeout
// or mpirun's exit, and returns what cond still said was missing ("" when
// nothing) and whether mpirun exited.
func pollJob(mu *sync.Mutex, j *mpitest.Job, timeout time.Duration, cond func() string) (missing string, exited bool) {
	end := time.Now().Add(timeout)
	for {
		mu.Lock()
		missing = cond()
		mu.Unlock()
		if missing == "" {
			return "", false
		}
		select {
		case <-j.Exited():
			return missing, true
		default:
		}
		if time.Now().After(end) {
			return missing, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check fails the test unless every survivor reported exactly the ranks
// in gone and no live rank was reported (mhJob.judge).
func (m *mhJob) check(what string, gone, survivors map[uint32]bool, exempt map[uint32]int64) {
	m.t.Helper()
	v := m.judge(gone, survivors, exempt)
	for _, e := range v.excused {
		m.t.Logf("%s: %s", what, e)
	}
	if len(v.falses) > 0 {
		m.t.Fatalf("%s: %s", what, v.falses[0])
	}
	if len(v.missed) > 0 {
		m.t.Fatalf("%s: %s", what, v.missed[0])
	}
}

// mhVerdict is what judge found.
type mhVerdict struct {
	// falses: a live rank reported dead, or a killed rank reported as
	// having left.
	falses []string
	// missed: a survivor that has not reported exactly the ranks gone.
	missed []string
	// excused: live ranks reported dead by a rank in exempt once that
	// rank was itself cut off (delivered at or after exempt[rank],
	// CLOCK_MONOTONIC ns): a rank declared dead while delayed, paused or
	// cut off suspects the others until it learns it is evicted.
	excused []string
}

// judge compares the reports with gone (the ranks that failed or were
// declared dead) and survivors.
func (m *mhJob) judge(gone, survivors map[uint32]bool, exempt map[uint32]int64) mhVerdict {
	m.mu.Lock()
	defer m.mu.Unlock()
	var v mhVerdict
	for _, r := range keys(m.dead) {
		for _, d := range keys(m.dead[r]) {
			ln := m.dead[r][d]
			switch since, ok := exempt[r]; {
			case gone[d] && ln.Left:
				v.falses = append(v.falses, fmt.Sprintf("rank %d reported that rank %d left; it was killed", r, d))
			case gone[d]:
			case ok && ln.DeliveredMono >= since:
				v.excused = append(v.excused, fmt.Sprintf("rank %d, itself cut off, reported live rank %d dead", r, d))
			default:
				v.falses = append(v.falses, fmt.Sprintf("rank %d reported live rank %d dead (detected by rank %d, delivered at mono %d; every report: %s)",
					r, d, ln.Detector, ln.DeliveredMono, m.reportsLocked()))
			}
		}
	}
	for _, r := range keys(survivors) {
		if len(m.dead[r]) != len(gone) {
			v.missed = append(v.missed, fmt.Sprintf("survivor %d reported %v, want exactly %v", r, keys(m.dead[r]), keys(gone)))
		}
	}
	return v
}

// reportsLocked lists every death report as reporter<-dead/detector@delivered
// (ms of CLOCK_MONOTONIC), for a failure's diagnosis; m.mu is held.
func (m *mhJob) reportsLocked() string {
	var b strings.Builder
	for _, r := range keys(m.dead) {
		for _, d := range keys(m.dead[r]) {
			ln := m.dead[r][d]
			fmt.Fprintf(&b, " %d<-%d/%d@%d", r, d, ln.Detector, ln.DeliveredMono/1e6)
		}
	}
	return b.String()
}

// missing returns a survivor that has not reported every rank in gone, or "".
func (m *mhJob) missing(gone, survivors map[uint32]bool) string {
	for _, r := range keys(survivors) {
		for _, d := range keys(gone) {
			if _, ok := m.dead[r][d]; !ok {
				return fmt.Sprintf("survivor %d has not reported rank %d", r, d)
			}
		}
	}
	return ""
}

// timing returns how long after t0 (CLOCK_MONOTONIC ns) the first and the
// last survivor learned of every rank in ds.
func (m *mhJob) timing(t0 int64, ds []uint32, survivors map[uint32]bool) (first, last time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first = time.Hour
	for r := range survivors {
		for _, d := range ds {
			at := time.Duration(m.dead[r][d].DeliveredMono - t0)
			first, last = min(first, at), max(last, at)
		}
	}
	return first, last
}

func keys[V any](m map[uint32]V) []uint32 {
	out := make([]uint32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestMultiHost runs the documented multi-host command, `mpirun --host
// h1,h2,h3,h4 -n 16 vigil agent`, across four simulated hosts
// (mpitest.Hosts: network namespaces on a bridge, launched through
// mpirun's ssh agent), with the PMIx bootstrap over TCP, h = 20 ms and
// δ = 500 ms. Ranks are placed round-robin (--map-by node), so every ring
// neighbour is on another host. It checks that every rank published its
// own host's address (never loopback or a wildcard), then, in turn:
//
//  1. host 4's link delayed by 200 ms, below δ − h, for 3 s: nobody
//     reports anything;
//  2. kill -9 of one rank: every survivor reports it;
//  3. host 3 killed (its link cut, then every process in it killed): the
//     survivors report its four ranks;
//  4. host 4's link delayed by 1.5 s, above δ: the survivors report its
//     four ranks, which are evicted.
//
// After each step every survivor has reported exactly the dead ranks and
// no live rank was reported, except, in step 4, by the delayed ranks
// themselves once cut off (see mhJob.check).
func TestMultiHost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun across network namespaces")
	}
	mpitest.NeedHosts(t)
	const h, delta = 20 * time.Millisecond, 500 * time.Millisecond
	multiHostScenarios(t, mhRun{
		argv:  []string{pmixVigil(t), "agent", "-h", h.String(), "-delta", delta.String(), "-partition", "continue"},
		delta: delta,
		published: func(t *testing.T, m *mhJob, r uint32, _ int, _ netip.Addr) netip.AddrPort {
			ap, err := netip.ParseAddrPort(m.ready[r].Addr)
			if err != nil {
				t.Fatalf("rank %d published %q: %v", r, m.ready[r].Addr, err)
			}
			return ap
		},
		addrs: "published addresses",
	})
}

// mhRun is a job for multiHostScenarios: ranks that print the lines of
// `vigil agent` (launch.Line: ready, and dead and evicted with their
// delivered_mono).
type mhRun struct {
	argv       []string      // the ranks' command
	env, extra []string      // added to mpirun's environment and options
	ppn        int           // ranks per host (0: 4), so 4 × ppn ranks
	delta      time.Duration // the ranks' δ
	// published returns the address rank r (process pid, on the host at
	// hostAddr) published to the others.
	published func(t *testing.T, m *mhJob, r uint32, pid int, hostAddr netip.Addr) netip.AddrPort
	addrs     string // what published returns, for the log
}

// multiHostScenarios runs run.argv as 4 × run.ppn ranks across four
// simulated hosts, run.ppn per host placed round-robin (--map-by node),
// checks that each published its own host's address, and runs
// TestMultiHost's four steps (a delay of h4's link below δ − h, kill -9 of
// rank 5 (on h2), h3 killed, a delay of h4's link above δ). The steps take
// 1 + 2 × run.ppn of 4 × run.ppn ranks without an agreement between them:
// by default (detector.PartitionFailStop) the last survivors would stop as
// a minority of the job (docs/partitions.md, TestMultiHostPartition), so
// run.argv and run.env must ask for -partition=continue (VIGIL_PARTITION).
func multiHostScenarios(t *testing.T, run mhRun) {
	const (
		nh                 = 4
		victim             = 5    // one rank, on h2 (round-robin placement)
		killHost, slowHost = 2, 3 // host indexes: h3 and h4
	)
	ppn := cmp.Or(run.ppn, 4)
	n := nh * ppn
	delta := run.delta
	below, above := 200*time.Millisecond, 3*delta // delays of h4's link
	hosts := mpitest.NewHosts(t, nh, slowHost)
	start := time.Now()
	j := hosts.Start(t, n, ppn, run.env, append([]string{"--map-by", "node"}, run.extra...), run.argv...)
	m := newMHJob(t, j)
	m.awaitReady(n)
	ready := node.Mono()
	pids, hostOf := hosts.WaitPIDs(n, 10*time.Second)
	t.Logf("%d ranks on %d hosts ready %v after mpirun started", n, nh, time.Since(start).Round(time.Millisecond))

	// Every rank published its own host's address.
	onHost := map[int]map[uint32]bool{}
	var addrs []string
	for r := range uint32(n) {
		hi := hostOf[int(r)]
		ap := run.published(t, m, r, pids[int(r)], hosts.Addr(hi))
		if a := ap.Addr(); a.IsLoopback() || a.IsUnspecified() || a != hosts.Addr(hi) {
			t.Fatalf("rank %d on host %s (%s) published %s", r, hosts.Name(hi), hosts.Addr(hi), ap)
		}
		addrs = append(addrs, ap.String())
		if onHost[hi] == nil {
			onHost[hi] = map[uint32]bool{}
		}
		onHost[hi][r] = true
	}
	for i := range nh {
		if len(onHost[i]) != ppn {
			t.Fatalf("host %d runs ranks %v, want %d ranks", i, keys(onHost[i]), ppn)
		}
	}
	if hostOf[victim] == killHost || hostOf[victim] == slowHost {
		t.Fatalf("rank %d runs on host %d: the test wants it elsewhere", victim, hostOf[victim])
	}
	t.Logf("%s by rank: %s", run.addrs, strings.Join(addrs, " "))

	gone, survivors := map[uint32]bool{}, map[uint32]bool{}
	for r := range uint32(n) {
		survivors[r] = true
	}
	// Past the start grace (2 s + δ from each rank's start).
	time.Sleep(time.Duration(ready+int64(2*time.Second+2*delta)-node.Mono()) + 300*time.Millisecond)

	// 1. A delay below δ − h reports nobody.
	hosts.Delay(slowHost, below)
	time.Sleep(3 * time.Second)
	hosts.Delay(slowHost, 0)
	time.Sleep(2 * delta)
	m.check("delay below δ−h", gone, survivors, nil)
	t.Logf("host %s delayed by %v for 3 s: no report", hosts.Name(slowHost), below)

	// 2. kill -9 of one rank.
	t0 := node.Mono()
	if err := syscall.Kill(pids[victim], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	gone[victim] = true
	delete(survivors, victim)
	m.await("kill -9 rank 5", 30*time.Second, func() string { return m.missing(gone, survivors) })
	time.Sleep(2 * delta)
	m.check("kill -9 rank 5", gone, survivors, nil)
	first, last := m.timing(t0, []uint32{victim}, survivors)
	t.Logf("kill -9 rank %d: first survivor knew after %v, all %d after %v", victim, first.Round(100*time.Microsecond), len(survivors), last.Round(100*time.Microsecond))

	// 3. A whole host: its link cut, then every process in it killed.
	t0 = node.Mono()
	hosts.LinkDown(killHost)
	hosts.Kill(killHost)
	for r := range onHost[killHost] {
		gone[r] = true
		delete(survivors, r)
	}
	m.await("host killed", 30*time.Second, func() string { return m.missing(gone, survivors) })
	time.Sleep(2 * delta)
	m.check("host killed", gone, survivors, nil)
	first, last = m.timing(t0, keys(onHost[killHost]), survivors)
	t.Logf("host %s (ranks %v) cut off and killed: first survivor knew of a rank after %v, all %d knew of all after %v",
		hosts.Name(killHost), keys(onHost[killHost]), first.Round(100*time.Microsecond), len(survivors), last.Round(100*time.Microsecond))

	// 4. A delay above δ reports the host's ranks, which are evicted.
	t0 = node.Mono()
	hosts.Delay(slowHost, above)
	exempt := map[uint32]int64{}
	for r := range onHost[slowHost] {
		gone[r], exempt[r] = true, t0
		delete(survivors, r)
	}
	m.await("delay above δ", 30*time.Second, func() string { return m.missing(gone, survivors) })
	first, last = m.timing(t0, keys(onHost[slowHost]), survivors)
	m.await("delayed ranks evicted", 30*time.Second, func() string {
		for _, r := range keys(onHost[slowHost]) {
			if !m.evicted[r] {
				return fmt.Sprintf("rank %d not evicted", r)
			}
		}
		return ""
	})
	time.Sleep(2 * delta)
	m.check("delay above δ", gone, survivors, exempt)
	t.Logf("host %s (ranks %v) delayed by %v: first survivor knew of a rank after %v, all %d knew of all after %v; all %d evicted",
		hosts.Name(slowHost), keys(onHost[slowHost]), above, first.Round(100*time.Microsecond), len(survivors), last.Round(100*time.Microsecond), ppn)
	t.Logf("whole job: %v", time.Since(start).Round(time.Millisecond))
}

// TestMultiHostRouteChoice runs `vigil agent`, then the C example
// csrc/examples/detect.c (libvigil), without address settings across
// three simulated hosts, two ranks each, where every host's first address
// is a decoy in another subnet (mpitest.HostsOptions.Decoys) that the
// other hosts cannot reach: each rank must publish (and, the C example,
// listen on) the address its kernel routes to the other hosts from, its
// bridge address, and a kill -9 must then be reported by every survivor,
// exactly.
func TestMultiHostRouteChoice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun across network namespaces")
	}
	mpitest.NeedHosts(t)
	const delta = 500 * time.Millisecond
	t.Run("agent", func(t *testing.T) {
		routeChoice(t, mhRun{
			argv:  []string{pmixVigil(t), "agent", "-h", "20ms", "-delta", delta.String()},
			delta: delta,
			published: func(t *testing.T, m *mhJob, r uint32, _ int, _ netip.Addr) netip.AddrPort {
				ap, err := netip.ParseAddrPort(m.ready[r].Addr)
				if err != nil {
					t.Fatalf("rank %d published %q: %v", r, m.ready[r].Addr, err)
				}
				return ap
			},
		})
	})
	t.Run("C", func(t *testing.T) {
		routeChoice(t, mhRun{
			argv:  []string{detectC(t)},
			env:   []string{"VIGIL_H=20ms", "VIGIL_DELTA=" + delta.String()},
			extra: []string{"-x", "VIGIL_H", "-x", "VIGIL_DELTA"},
			delta: delta,
			published: func(t *testing.T, _ *mhJob, r uint32, pid int, hostAddr netip.Addr) netip.AddrPort {
				return checkListens(t, fmt.Sprintf("rank %d", r), pid, hostAddr)
			},
		})
	})
}

// routeChoice is one job of TestMultiHostRouteChoice: run.argv as 3 × 2
// ranks on hosts with decoys.
func routeChoice(t *testing.T, run mhRun) {
	const nh, ppn, n, victim = 3, 2, 6, 4
	hosts := mpitest.NewHostsWith(t, nh, mpitest.HostsOptions{Decoys: true})
	for i := range nh {
		if a := hosts.FirstAddr(i); a != hosts.DecoyAddr(i) {
			t.Fatalf("host %d's first address is %s, not its decoy %s", i, a, hosts.DecoyAddr(i))
		}
	}
	j := hosts.Start(t, n, ppn, run.env, append([]string{"--map-by", "node"}, run.extra...), run.argv...)
	m := newMHJob(t, j)
	m.awaitReady(n)
	ready := node.Mono()
	pids, hostOf := hosts.WaitPIDs(n, 10*time.Second)
	var addrs []string
	for r := range uint32(n) {
		hi := hostOf[int(r)]
		ap := run.published(t, m, r, pids[int(r)], hosts.Addr(hi))
		if !hosts.Subnet().Contains(ap.Addr()) || ap.Addr() != hosts.Addr(hi) {
			t.Fatalf("rank %d on host %s (bridge %s, decoy %s) published %s", r, hosts.Name(hi), hosts.Addr(hi), hosts.DecoyAddr(hi), ap)
		}
		addrs = append(addrs, ap.String())
	}
	t.Logf("published by rank, the hosts' first addresses being decoys: %s", strings.Join(addrs, " "))

	gone, survivors := map[uint32]bool{victim: true}, map[uint32]bool{}
	for r := range uint32(n) {
		if r != victim {
			survivors[r] = true
		}
	}
	time.Sleep(time.Duration(ready+int64(2*time.Second+2*run.delta)-node.Mono()) + 300*time.Millisecond) // past the start grace
	t0 := node.Mono()
	if err := syscall.Kill(pids[victim], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m.await("kill -9", 30*time.Second, func() string { return m.missing(gone, survivors) })
	time.Sleep(2 * run.delta)
	m.check("kill -9", gone, survivors, nil)
	first, last := m.timing(t0, []uint32{victim}, survivors)
	t.Logf("kill -9 rank %d (host %s): first survivor knew after %v, all %d after %v", victim, hosts.Name(hostOf[victim]),
		first.Round(100*time.Microsecond), len(survivors), last.Round(100*time.Microsecond))
}

// TestMultiHostAddressSettings runs `vigil agent` with address flags
// across two simulated hosts: a wildcard -bind with -if-include the hosts'
// subnet publishes each host's own address; -if-include lo and
// -advertise 127.0.0.1 fail on every rank with an error naming the flag.
func TestMultiHostAddressSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun across network namespaces")
	}
	mpitest.NeedHosts(t)
	bin := pmixVigil(t)
	hosts := mpitest.NewHosts(t, 2)
	const n = 4
	agent := []string{bin, "agent", "-h", "20ms", "-delta", "1s"}

	j := hosts.Start(t, n, 2, nil, nil, append(agent, "-bind", "0.0.0.0", "-if-include", hosts.Subnet().String())...)
	m := newMHJob(t, j)
	m.awaitReady(n)
	_, hostOf := hosts.WaitPIDs(n, 10*time.Second)
	for r := uint32(0); r < n; r++ {
		ap, err := netip.ParseAddrPort(m.ready[r].Addr)
		if err != nil || ap.Addr() != hosts.Addr(hostOf[int(r)]) {
			t.Fatalf("rank %d on host %s listening on 0.0.0.0 published %q (%v)", r, hosts.Addr(hostOf[int(r)]), m.ready[r].Addr, err)
		}
	}
	j.Terminate(10 * time.Second)

	for _, tc := range []struct{ flag, value, want string }{
		{"-if-include", "lo", "netaddr: -if-include: no up interface has a usable address matching -if-include=lo other than loopback"},
		{"-advertise", "127.0.0.1", "netaddr: -advertise: 127.0.0.1 is a loopback address, but the job's ranks run on several hosts"},
	} {
		j := hosts.Start(t, n, 2, nil, nil, append(agent, tc.flag, tc.value)...)
		select {
		case <-j.Exited():
		case <-time.After(60 * time.Second):
			t.Fatalf("%s %s: mpirun still running after 60 s\n%s", tc.flag, tc.value, j.Stderr())
		}
		if c := strings.Count(j.Stderr(), tc.want); c != n {
			t.Fatalf("%s %s: %d ranks said %q, want %d\nstderr:\n%s", tc.flag, tc.value, c, tc.want, n, j.Stderr())
		}
	}
}
