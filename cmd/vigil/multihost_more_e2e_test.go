package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/mpitest"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
)

// The daemon mode, the C ABI and the PMPI library across the simulated
// hosts of TestMultiHost (mpitest.Hosts: network namespaces on a bridge,
// launched by Open MPI's mpirun through its launcher agent). Each test
// skips, saying why, as TestMultiHost does: not root, no ip netns, no
// mpirun (and no gcc or mpicc for the C ones).

// procSocket is one TCP or UDP socket of a process, from /proc.
type procSocket struct {
	local, remote netip.AddrPort
	state         uint8 // the kernel's TCP state: 0x0A listening, 0x01 established (UDP: 0x07)
}

const (
	tcpEstablished = 0x01
	tcpListen      = 0x0A
)

// procSockets returns process pid's sockets of protocol proto ("tcp" or
// "udp", IPv4 and IPv6): the inodes of its socket descriptors looked up in
// /proc/pid/net/proto{,6}, the tables of its network namespace.
func procSockets(pid int, proto string) ([]procSocket, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if ino, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	var out []procSocket
	for _, table := range []string{proto, proto + "6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			if table == proto {
				return nil, err
			}
			continue // no IPv6
		}
		lines := strings.Split(string(b), "\n")
		for _, line := range lines[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			local, err1 := parseProcAddr(f[1])
			remote, err2 := parseProcAddr(f[2])
			st, err3 := strconv.ParseUint(f[3], 16, 8)
			if err1 != nil || err2 != nil || err3 != nil {
				return nil, fmt.Errorf("/proc/%d/net/%s: bad line %q", pid, table, line)
			}
			out = append(out, procSocket{local: local, remote: remote, state: uint8(st)})
		}
	}
	return out, nil
}

// parseProcAddr parses an address of /proc/net/{tcp,udp}{,6}: the address
// as 32-bit words in host byte order, in hex, then ":" and the port.
func parseProcAddr(s string) (netip.AddrPort, error) {
	hx, hp, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(hp, 16, 16)
	if !ok || err != nil || (len(hx) != 8 && len(hx) != 32) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	b := make([]byte, len(hx)/2)
	for i := 0; i < len(hx); i += 8 {
		w, err := strconv.ParseUint(hx[i:i+8], 16, 32)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
		}
		binary.NativeEndian.PutUint32(b[i/2:], uint32(w))
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a.Unmap(), uint16(port)), nil
}

// checkListens finds the listener of Vigil's TCP transport in process pid
// (what): a TCP listener with a UDP socket (the heartbeats) on the same
// address and port. It fails unless there is exactly one, on the host's
// address want, and returns it. (Other listeners, such as MPI's, are
// ignored.)
func checkListens(t *testing.T, what string, pid int, want netip.Addr) netip.AddrPort {
	t.Helper()
	tcp, err := procSockets(pid, "tcp")
	if err != nil {
		t.Fatalf("%s (pid %d): %v", what, pid, err)
	}
	udp, err := procSockets(pid, "udp")
	if err != nil {
		t.Fatalf("%s (pid %d): %v", what, pid, err)
	}
	var ln, all []netip.AddrPort
	for _, s := range tcp {
		if s.state != tcpListen {
			continue
		}
		all = append(all, s.local)
		if slices.ContainsFunc(udp, func(u procSocket) bool { return u.local == s.local }) {
			ln = append(ln, s.local)
		}
	}
	if len(ln) != 1 || ln[0].Addr() != want || want.IsLoopback() || want.IsUnspecified() {
		t.Fatalf("%s (pid %d) listens with a UDP socket beside on %v (TCP listeners: %v, UDP: %v), want on %s:port only", what, pid, ln, all, udp, want)
	}
	return ln[0]
}

// hostOfPID returns the host (index) whose network namespace runs pid, or -1.
func hostOfPID(hosts *mpitest.Hosts, pid int) int {
	for i := range hosts.N() {
		if slices.Contains(hosts.PIDs(i), pid) {
			return i
		}
	}
	return -1
}

// envOf returns the value of name in the environment of process pid.
func envOf(pid int, name string) (string, bool) {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return "", false
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// mhDaemons gathers the lines of a multi-host mpirun job of daemons.
type mhDaemons struct {
	t       *testing.T
	j       *mpitest.Job
	mu      sync.Mutex
	ready   map[ranks.Rank]daemonLine
	got     map[ranks.Rank]map[string]daemonLine // reporter → "node 2" or "proc 5 crashed" → line
	evicted map[ranks.Rank]daemonLine
	odd     []string // lines that are neither ready, a failure nor evicted
}

func newMHDaemons(t *testing.T, j *mpitest.Job) *mhDaemons {
	m := &mhDaemons{t: t, j: j, ready: map[ranks.Rank]daemonLine{}, got: map[ranks.Rank]map[string]daemonLine{},
		evicted: map[ranks.Rank]daemonLine{}}
	go func() {
		for l := range j.Lines() {
			var ln daemonLine
			if err := json.Unmarshal([]byte(l.Text), &ln); err != nil || int(ln.Self) != l.Rank {
				t.Errorf("mpirun rank %d printed %q (%v)", l.Rank, l.Text, err)
				continue
			}
			m.mu.Lock()
			switch ln.Kind {
			case "ready":
				m.ready[ln.Self] = ln
			case "node", "proc":
				if m.got[ln.Self] == nil {
					m.got[ln.Self] = map[string]daemonLine{}
				}
				m.got[ln.Self][daemonKey(ln)] = ln
			case "evicted":
				m.evicted[ln.Self] = ln
			default:
				m.odd = append(m.odd, fmt.Sprintf("daemon %d: %s", l.Rank, l.Text))
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// daemonKey names a failure event: "node 2", or "proc 5 crashed".
func daemonKey(ln daemonLine) string {
	if ln.Kind == "node" {
		return fmt.Sprintf("node %d", ln.Node)
	}
	return fmt.Sprintf("proc %d %s", ln.Rank, ln.Cause)
}

// await waits until cond returns "" (awaitJob).
func (m *mhDaemons) await(what string, timeout time.Duration, cond func() string) {
	m.t.Helper()
	awaitJob(m.t, &m.mu, m.j, what, timeout, cond)
}

func (m *mhDaemons) missing(want map[string]bool, survivors []ranks.Rank) string {
	for _, r := range survivors {
		for k := range want {
			if _, ok := m.got[r][k]; !ok {
				return fmt.Sprintf("daemon %d has not reported %q", r, k)
			}
		}
	}
	return ""
}

// check fails unless every survivor reported exactly the events in want,
// nobody reported another, and no daemon printed anything else, except a
// daemon in exempt after the time exempt gives it (CLOCK_MONOTONIC ns): a
// daemon whose own link is delayed beyond δ is cut off and may report the
// others before it learns that it was evicted (as in mhJob.check); a
// daemon not in exempt must not be evicted.
func (m *mhDaemons) check(what string, want map[string]bool, survivors []ranks.Rank, exempt map[ranks.Rank]int64) {
	m.t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.odd) > 0 {
		m.t.Fatalf("%s: unexpected lines %q", what, m.odd)
	}
	for r := range m.evicted {
		if _, ok := exempt[r]; !ok {
			m.t.Fatalf("%s: daemon %d was evicted", what, r)
		}
	}
	for r, got := range m.got {
		for k, ln := range got {
			if want[k] {
				continue
			}
			if since, ok := exempt[r]; ok && ln.Mono >= since {
				m.t.Logf("%s: daemon %d, itself cut off, reported %q", what, r, k)
				continue
			}
			m.t.Fatalf("%s: daemon %d reported %q; want only %v", what, r, k, slices.Sorted(mapKeys(want)))
		}
	}
	for _, r := range survivors {
		if len(m.got[r]) != len(want) {
			m.t.Fatalf("%s: daemon %d reported %v, want exactly %v", what, r, slices.Sorted(mapKeys(m.got[r])), slices.Sorted(mapKeys(want)))
		}
	}
}

// timing returns how long after t0 (CLOCK_MONOTONIC ns) the first
// survivor learned any of the events ks, and the last survivor all of them.
func (m *mhDaemons) timing(t0 int64, ks []string, survivors []ranks.Rank) (first, last time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first = time.Hour
	for _, r := range survivors {
		for _, k := range ks {
			at := time.Duration(m.got[r][k].Mono - t0)
			first, last = min(first, at), max(last, at)
		}
	}
	return first, last
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestMultiHostDaemons runs the documented node-level launch,
// `mpirun --map-by ppr:1:node vigil daemon -ppn 4 -- app`, across four
// simulated hosts (as TestMultiHost): one daemon per host (vigil built
// with -tags pmix: node index, job key and the daemons' addresses through
// PMIx), each starting four local processes (sleep 600), h = 20 ms,
// δ = 500 ms. It checks that every daemon listens (TCP, and UDP for
// heartbeats) on its own host's address, which it publishes (never
// loopback or a wildcard), then, in turn:
//
//  1. host 4's link delayed by 200 ms, below δ − h, for 3 s: nobody
//     reports anything;
//  2. kill -9 of one local process (on host 2): every daemon reports it
//     (crashed), and every daemon-to-daemon TCP connection joins two
//     hosts' addresses;
//  3. host 3 killed (its link cut, then its daemon and processes): the
//     three survivors report its node and its four ranks (node_down);
//  4. host 4's link delayed by 1.5 s, above δ: the two survivors report
//     its node and ranks, and its daemon says it was evicted.
//
// After each step every survivor has reported exactly those events, and
// nothing else was reported (but by the delayed daemon once cut off).
func TestMultiHostDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun across network namespaces")
	}
	mpitest.NeedHosts(t)
	const (
		nh, ppn                        = 4, 4
		h, delta                       = 20 * time.Millisecond, 500 * time.Millisecond
		below, above                   = 200 * time.Millisecond, 3 * delta // delays of h4's link
		victimHost, killHost, slowHost = 1, 2, 3                           // host indexes: h2, h3, h4
	)
	bin := pmixVigil(t)
	hosts := mpitest.NewHosts(t, nh, slowHost)
	start := time.Now()
	j := hosts.Start(t, nh, 1, nil, []string{"--map-by", "ppr:1:node"}, bin, "daemon", "-ppn", strconv.Itoa(ppn),
		"-h", h.String(), "-delta", delta.String(), "-sock", filepath.Join(t.TempDir(), "n{node}.sock"), "--", "sleep", "600")
	m := newMHDaemons(t, j)
	m.await("start", 60*time.Second, func() string {
		if len(m.ready) < nh {
			return fmt.Sprintf("%d of %d daemons ready", len(m.ready), nh)
		}
		return ""
	})
	ready := node.Mono()
	t.Logf("%d daemons on %d hosts ready %v after mpirun started", nh, nh, time.Since(start).Round(time.Millisecond))

	// One daemon per host, listening on its host's address, with its
	// four processes.
	hostOf := map[ranks.Rank]int{}
	nodeOn := map[int]ranks.Rank{} // host → node
	procs := map[ranks.Rank]int{}  // rank → pid
	var listens []string
	listening := map[netip.AddrPort]ranks.Rank{}
	for d := ranks.Rank(0); d < nh; d++ {
		pid := m.ready[d].Pid
		hi := hostOfPID(hosts, pid)
		if hi < 0 {
			t.Fatalf("daemon %d (pid %d) runs on no simulated host", d, pid)
		}
		if other, ok := nodeOn[hi]; ok {
			t.Fatalf("daemons %d and %d both run on host %s", other, d, hosts.Name(hi))
		}
		hostOf[d], nodeOn[hi] = hi, d
		ap := checkListens(t, fmt.Sprintf("daemon %d on host %s", d, hosts.Name(hi)), pid, hosts.Addr(hi))
		listening[ap] = d
		listens = append(listens, ap.String())
		for _, p := range hosts.PIDs(hi) {
			v, ok := envOf(p, "VIGIL_RANK")
			if r, err := strconv.Atoi(v); ok && err == nil {
				if int(d)*ppn > r || r >= int(d+1)*ppn {
					t.Fatalf("host %s (node %d) runs rank %d", hosts.Name(hi), d, r)
				}
				procs[ranks.Rank(r)] = p
			}
		}
	}
	if len(procs) != nh*ppn {
		t.Fatalf("found %d local processes on the hosts, want %d: %v", len(procs), nh*ppn, procs)
	}
	t.Logf("daemons listen on (node order): %s", strings.Join(listens, " "))
	// nodeDown returns the events of node d's failure.
	nodeDown := func(d ranks.Rank) []string {
		ks := []string{fmt.Sprintf("node %d", d)}
		for r := int(d) * ppn; r < int(d+1)*ppn; r++ {
			ks = append(ks, fmt.Sprintf("proc %d node_down", r))
		}
		return ks
	}

	// Past the daemons' start grace (2 s + δ).
	time.Sleep(time.Duration(ready+int64(2*time.Second+2*delta)-node.Mono()) + 300*time.Millisecond)
	survivors := []ranks.Rank{0, 1, 2, 3}
	want := map[string]bool{}
	m.check("start", want, survivors, nil)

	// 1. A delay below δ − h reports nobody.
	hosts.Delay(slowHost, below)
	time.Sleep(3 * time.Second)
	hosts.Delay(slowHost, 0)
	time.Sleep(2 * delta)
	m.check("delay below δ−h", want, survivors, nil)
	t.Logf("host %s delayed by %v for 3 s: no report", hosts.Name(slowHost), below)

	// 2. kill -9 of one local process.
	victim := nodeOn[victimHost]*ppn + 1
	t0 := node.Mono()
	if err := syscall.Kill(procs[victim], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf("proc %d crashed", victim)
	want[k] = true
	m.await("kill -9 of a local process", 30*time.Second, func() string { return m.missing(want, survivors) })
	time.Sleep(2 * delta)
	m.check("kill -9 of a local process", want, survivors, nil)
	first, last := m.timing(t0, []string{k}, survivors)
	t.Logf("kill -9 of local process %d (node %d): first daemon knew after %v, all %d after %v",
		victim, nodeOn[victimHost], first.Round(100*time.Microsecond), len(survivors), last.Round(100*time.Microsecond))

	// The daemons' reports went over TCP to the others' published
	// addresses: every daemon-to-daemon connection joins two hosts' addresses.
	var conns []string
	for d := ranks.Rank(0); d < nh; d++ {
		socks, err := procSockets(m.ready[d].Pid, "tcp")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range socks {
			if to, ok := listening[s.remote]; ok && s.state == tcpEstablished {
				if s.local.Addr() != hosts.Addr(hostOf[d]) || s.remote.Addr() != hosts.Addr(hostOf[to]) {
					t.Fatalf("daemon %d's connection %s → daemon %d at %s: want its host's %s", d, s.local, to, s.remote, hosts.Addr(hostOf[d]))
				}
				conns = append(conns, fmt.Sprintf("%d→%d", d, to))
			}
		}
	}
	if len(conns) == 0 {
		t.Fatal("no TCP connection between the daemons after a report")
	}
	slices.Sort(conns)
	t.Logf("daemon-to-daemon TCP connections after the report: %s", strings.Join(conns, " "))

	// 3. A whole host: its link cut, then its daemon and processes killed.
	kn := nodeOn[killHost]
	t0 = node.Mono()
	hosts.LinkDown(killHost)
	hosts.Kill(killHost)
	survivors = slices.DeleteFunc(survivors, func(r ranks.Rank) bool { return r == kn })
	ks := nodeDown(kn)
	for _, k := range ks {
		want[k] = true
	}
	m.await("host killed", 30*time.Second, func() string { return m.missing(want, survivors) })
	time.Sleep(2 * delta)
	m.check("host killed", want, survivors, nil)
	first, last = m.timing(t0, ks, survivors)
	t.Logf("host %s (node %d, ranks %d–%d) cut off and killed: first daemon knew after %v, all %d knew of the node and its ranks after %v",
		hosts.Name(killHost), kn, int(kn)*ppn, int(kn+1)*ppn-1, first.Round(100*time.Microsecond), len(survivors), last.Round(100*time.Microsecond))

	// 4. A delay above δ reports the host's node and ranks; its daemon
	// is evicted.
	sn := nodeOn[slowHost]
	t0 = node.Mono()
	hosts.Delay(slowHost, above)
	survivors = slices.DeleteFunc(survivors, func(r ranks.Rank) bool { return r == sn })
	ks = nodeDown(sn)
	for _, k := range ks {
		want[k] = true
	}
	exempt := map[ranks.Rank]int64{sn: t0}
	m.await("delay above δ", 30*time.Second, func() string { return m.missing(want, survivors) })
	first, last = m.timing(t0, ks, survivors)
	m.await("delayed daemon evicted", 30*time.Second, func() string {
		if _, ok := m.evicted[sn]; !ok {
			return fmt.Sprintf("daemon %d not evicted", sn)
		}
		return ""
	})
	time.Sleep(2 * delta)
	m.check("delay above δ", want, survivors, exempt)
	m.mu.Lock()
	evictedAfter := time.Duration(m.evicted[sn].Mono - t0)
	m.mu.Unlock()
	t.Logf("host %s (node %d, ranks %d–%d) delayed by %v: first daemon knew after %v, all %d knew of the node and its ranks after %v; its daemon evicted after %v",
		hosts.Name(slowHost), sn, int(sn)*ppn, int(sn+1)*ppn-1, above, first.Round(100*time.Microsecond), len(survivors), last.Round(100*time.Microsecond),
		evictedAfter.Round(100*time.Microsecond))
	t.Logf("whole job: %v", time.Since(start).Round(time.Millisecond))
}

var detectBuild struct {
	once sync.Once
	bin  string
	err  error
}

// detectC builds libvigil (shared, -tags pmix) and csrc/examples/detect.c
// linked with it, once per test binary; it skips the test without gcc.
func detectC(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("gcc is not installed (%v): the test compiles csrc/examples/detect.c", err)
	}
	detectBuild.once.Do(func() {
		dir := filepath.Join(filepath.Dir(vigilBin), "capi")
		if out, err := exec.Command("go", "build", "-tags", "pmix", "-buildmode=c-shared", "-o", filepath.Join(dir, "libvigil.so"), "../../capi").CombinedOutput(); err != nil {
			detectBuild.err = fmt.Errorf("go build -tags pmix -buildmode=c-shared ../../capi: %v\n%s", err, out)
			return
		}
		bin := filepath.Join(dir, "detect")
		args := []string{"-O1", "-g", "-Wall", "-Wextra", "-Werror", "-I../../csrc", "-o", bin, "../../csrc/examples/detect.c",
			"-L" + dir, "-lvigil", "-lpthread", "-Wl,-rpath," + dir}
		if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			detectBuild.err = fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
			return
		}
		detectBuild.bin = bin
	})
	if detectBuild.err != nil {
		t.Fatal(detectBuild.err)
	}
	return detectBuild.bin
}

// TestMultiHostC runs the C example csrc/examples/detect.c, linked with
// libvigil built with -tags pmix, as TestMultiHost runs `vigil agent`: 16
// ranks across four simulated hosts (4 per host, --map-by node), h = 20
// ms, δ = 500 ms (VIGIL_H and VIGIL_DELTA, passed with -x). Every rank
// must listen (TCP, and UDP for heartbeats) on its own host's address,
// which it publishes; then TestMultiHost's steps: a delay of host 4's link
// below δ − h reports nobody; kill -9 of one rank, and host 3 killed (its
// link cut, then every process in it), are reported by every survivor's
// failure callback, exactly; a delay above δ reports host 4's ranks, which
// are told they were evicted.
func TestMultiHostC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun across network namespaces")
	}
	mpitest.NeedHosts(t)
	const delta = 500 * time.Millisecond
	multiHostScenarios(t, mhRun{
		argv:  []string{detectC(t)},
		env:   []string{"VIGIL_H=20ms", "VIGIL_DELTA=" + delta.String(), "VIGIL_PARTITION=continue"},
		extra: []string{"-x", "VIGIL_H", "-x", "VIGIL_DELTA", "-x", "VIGIL_PARTITION"},
		delta: delta,
		published: func(t *testing.T, _ *mhJob, r uint32, pid int, hostAddr netip.Addr) netip.AddrPort {
			return checkListens(t, fmt.Sprintf("rank %d", r), pid, hostAddr)
		},
		addrs: "listen (and published) addresses",
	})
}

var pmpiBuildMH struct {
	once       sync.Once
	shim, prog string
	err        error
}

// pmpiRing builds the PMPI library (csrc/pmpi/vigil_pmpi.c, shared, linked
// with detectC's libvigil) and csrc/pmpi/examples/pmpi_ring.c (plain MPI,
// for LD_PRELOAD), once per test binary; it skips the test without mpicc.
func pmpiRing(t *testing.T) (shim, prog string) {
	t.Helper()
	mpicc, err := exec.LookPath("mpicc")
	if err != nil {
		t.Skipf("mpicc is not installed (%v); install libopenmpi-dev to run the PMPI test", err)
	}
	libDir := filepath.Dir(detectC(t))
	pmpiBuildMH.once.Do(func() {
		shim, prog := filepath.Join(libDir, "libvigil_pmpi.so"), filepath.Join(libDir, "pmpi_ring")
		for _, args := range [][]string{
			{"-fPIC", "-shared", "-I../../csrc", "-o", shim, "../../csrc/pmpi/vigil_pmpi.c", "-L" + libDir, "-lvigil", "-Wl,-rpath," + libDir},
			{"-o", prog, "../../csrc/pmpi/examples/pmpi_ring.c"},
		} {
			args = append([]string{"-O2", "-g", "-Wall", "-Wextra", "-Werror"}, args...)
			if out, err := exec.Command(mpicc, args...).CombinedOutput(); err != nil {
				pmpiBuildMH.err = fmt.Errorf("mpicc %s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
		pmpiBuildMH.shim, pmpiBuildMH.prog = shim, prog
	})
	if pmpiBuildMH.err != nil {
		t.Fatal(pmpiBuildMH.err)
	}
	return pmpiBuildMH.shim, pmpiBuildMH.prog
}

// TestMultiHostPMPI runs pmpi_ring, an MPI program that knows nothing of
// Vigil, with the PMPI library preloaded (ring mode, JSON lines), as
// TestMultiHost runs `vigil agent` but with 8 ranks (2 per host, --map-by
// node; --mca mpi_yield_when_idle 1: ranks waiting in MPI_Waitall poll,
// and 16 of them starved the detectors of a 2-core machine into false
// reports), h = 20 ms, δ = 500 ms. The library learns ranks, hosts and
// addresses through MPI (allgathers), not PMIx, and no address variable
// is set: seeing the ranks on several hosts (network namespaces here),
// every rank must listen (TCP, and UDP for heartbeats) on its own host's
// address, never loopback. Then TestMultiHost's steps: a delay of
// host 4's link below δ − h reports nobody; kill -9 of rank 5, and host 3
// killed (its link cut, then every process in it, its Open MPI daemon
// included), are reported by every survivor, exactly; a delay above δ
// reports host 4's ranks, which are told they were evicted. mpirun keeps
// the job running throughout (mpitest.Flags, Hosts.Flags); the survivors'
// ring blocks on the first dead rank, and their detectors report on.
func TestMultiHostPMPI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun across network namespaces")
	}
	mpitest.NeedHosts(t)
	shim, prog := pmpiRing(t)
	const delta = 500 * time.Millisecond
	env := []string{"VIGIL_PMPI_MODE=ring", "VIGIL_PMPI_OUTPUT=json", "VIGIL_H=20ms", "VIGIL_DELTA=" + delta.String(),
		"VIGIL_PARTITION=continue", "LD_PRELOAD=" + shim}
	extra := []string{"--mca", "mpi_yield_when_idle", "1"}
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		extra = append(extra, "-x", name)
	}
	multiHostScenarios(t, mhRun{
		argv:  []string{prog, "1000000"},
		env:   env,
		extra: extra,
		ppn:   2,
		delta: delta,
		published: func(t *testing.T, _ *mhJob, r uint32, pid int, hostAddr netip.Addr) netip.AddrPort {
			return checkListens(t, fmt.Sprintf("rank %d", r), pid, hostAddr)
		},
		addrs: "listen (and published) addresses",
	})
}
