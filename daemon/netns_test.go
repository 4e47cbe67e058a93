package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/testnet"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
)

// The multi-node test runs `vigil daemon` binaries as separate "nodes" of
// this machine: each node is a network namespace with its own address,
// joined to the others by veth pairs on a bridge (in a namespace of its
// own), and a process group holding the daemon and every process of the
// node. Without root or ip(8), or if namespaces are refused, the nodes
// share the loopback interface instead (logged).

// line is one JSON line of `vigil daemon` (cmd/vigil/daemon.go).
type line struct {
	Event
	Mono int64      `json:"mono"`
	Self ranks.Rank `json:"self"`
	Pid  int        `json:"pid"`
	who  string
}

// buildVigil builds cmd/vigil into dir.
func buildVigil(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "vigil")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/vigil").CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/vigil: %v\n%s", err, out)
	}
	return bin
}

// netnsNodes creates n namespaces joined by a bridge and returns the
// command prefix that runs a program in node i, and node i's address; ok
// is false when namespaces are not available (the reason is logged).
func netnsNodes(t *testing.T, n int) (prefix func(i int) []string, addr func(i int) string, ok bool) {
	if os.Geteuid() != 0 {
		t.Log("not root: nodes share loopback instead of network namespaces")
		return nil, nil, false
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Log("no ip(8): nodes share loopback instead of network namespaces")
		return nil, nil, false
	}
	tag := fmt.Sprintf("vgd%d", os.Getpid()%100000)
	sw := tag + "sw"
	var cmds [][]string
	cmds = append(cmds, []string{"netns", "add", sw}, []string{"-n", sw, "link", "add", "br0", "type", "bridge"},
		[]string{"-n", sw, "link", "set", "br0", "up"})
	for i := 0; i < n; i++ {
		ns, peer := fmt.Sprintf("%sn%d", tag, i), fmt.Sprintf("p%d", i)
		cmds = append(cmds, []string{"netns", "add", ns},
			[]string{"link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", peer, "netns", sw},
			[]string{"-n", ns, "addr", "add", fmt.Sprintf("10.77.0.%d/24", i+1), "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"}, []string{"-n", ns, "link", "set", "lo", "up"},
			[]string{"-n", sw, "link", "set", peer, "master", "br0"}, []string{"-n", sw, "link", "set", peer, "up"})
	}
	cleanup := func() {
		for i := 0; i < n; i++ {
			exec.Command("ip", "netns", "del", fmt.Sprintf("%sn%d", tag, i)).Run()
		}
		exec.Command("ip", "netns", "del", sw).Run()
	}
	for _, c := range cmds {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			cleanup()
			t.Logf("ip %s: %v (%s): nodes share loopback instead of network namespaces", strings.Join(c, " "), err, out)
			return nil, nil, false
		}
	}
	t.Cleanup(cleanup)
	return func(i int) []string { return []string{"ip", "netns", "exec", fmt.Sprintf("%sn%d", tag, i)} },
		func(i int) string { return fmt.Sprintf("10.77.0.%d:7946", i+1) }, true
}

// procs collects the JSON lines of the test's processes.
type procs struct {
	t     testing.TB
	lines chan line
	mu    sync.Mutex
	cmds  []*exec.Cmd
	logs  []*strings.Builder
}

// start runs argv (with prefix) in process group pgid (0: a new group)
// and feeds its stdout lines, tagged who, to p.lines.
func (p *procs) start(who string, pgid int, env []string, argv ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	var log strings.Builder
	cmd.Stderr = &lockedWriter{b: &log, mu: &p.mu}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.cmds = append(p.cmds, cmd)
	p.logs = append(p.logs, &log)
	p.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l line
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				l.who = who
				p.lines <- l
			}
		}
	}()
	return cmd
}

type lockedWriter struct {
	b  *strings.Builder
	mu *sync.Mutex
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(b)
}

func (p *procs) stop() {
	for _, c := range p.cmds {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		c.Process.Kill()
		c.Wait()
	}
}

func (p *procs) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s []string
	for _, l := range p.logs {
		s = append(s, l.String())
	}
	return strings.Join(s, "\n")
}

// awaitKind reads lines until n of them are of kind (others are passed
// over), failing the test after timeout.
func (p *procs) awaitKind(kind string, n int, timeout time.Duration) {
	p.t.Helper()
	deadline := time.After(timeout)
	for got := 0; got < n; {
		select {
		case l := <-p.lines:
			if l.Kind == kind {
				got++
			}
		case <-deadline:
			p.t.Fatalf("%d of %d %s lines\n%s", got, n, kind, p.stderr())
		}
	}
}

// await reads lines until every (who, key) pair of want was seen; it
// returns the latest delivery time (mono) among them. Other failure lines
// fail the test unless they are in allow.
func (p *procs) await(what string, want map[string]bool, timeout time.Duration) int64 {
	p.t.Helper()
	deadline := time.After(timeout)
	var last int64
	for left := len(want); left > 0; {
		select {
		case l := <-p.lines:
			if l.Kind != KindNode && l.Kind != KindProc {
				continue
			}
			k := l.who + ": " + key(l.Event)
			seen, ok := want[k]
			if !ok || seen {
				p.t.Fatalf("%s: unexpected %s\n%s", what, k, p.stderr())
			}
			want[k] = true
			left--
			last = max(last, l.Mono)
		case <-deadline:
			var miss []string
			for k, v := range want {
				if !v {
					miss = append(miss, k)
				}
			}
			p.t.Fatalf("%s: timed out; missing %v\n%s", what, miss, p.stderr())
		}
	}
	return last
}

// pidByRank finds the spawned process of rank r among the children of the
// daemon with pid dpid.
func pidByRank(t *testing.T, dpid int, r ranks.Rank) int {
	t.Helper()
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", dpid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			env, _ := os.ReadFile("/proc/" + s + "/environ")
			for _, kv := range strings.Split(string(env), "\x00") {
				if kv == "VIGIL_RANK="+strconv.Itoa(int(r)) {
					pid, _ := strconv.Atoi(s)
					return pid
				}
			}
		}
	}
	t.Fatalf("no child of daemon %d runs rank %d", dpid, r)
	return 0
}

// TestNodesKill: three nodes × three ranks; on each node the daemon starts
// ranks 3i and 3i+1 (children, watched with waitid) and rank 3i+2 is
// started by the test and attaches (watched with a pidfd and its heartbeat
// word). Over TCP between the namespaces:
//  1. SIGKILL of rank 3 (a child on node 1): every daemon and every
//     attached process learns "rank 3 crashed";
//  2. SIGSTOP of rank 5 (attached, node 1): reported hung, everywhere
//     (hang time-out 1 s: generous, so that a starved heartbeat goroutine
//     on a loaded machine is not taken for a hang);
//  3. SIGKILL of node 2's whole process group (daemon and all its
//     processes at once): the survivors report node 2 with ranks 6, 7, 8.
func TestNodesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the vigil binary")
	}
	const n, ppn = 3, 3
	dir := t.TempDir()
	bin := buildVigil(t, dir)
	prefix, addr, netns := netnsNodes(t, n)
	var peers []string
	if netns {
		for i := 0; i < n; i++ {
			peers = append(peers, addr(i))
		}
	} else {
		peers = testnet.FreeAddrs(t, n)
		prefix = func(int) []string { return nil }
	}
	t.Logf("network namespaces: %v; daemons at %v", netns, peers)
	p := &procs{t: t, lines: make(chan line, 1024)}
	defer p.stop()
	env := []string{"VIGIL_DAEMON_KEY=00112233445566778899aabbccddeeff"}
	var dpids []int
	for i := 0; i < n; i++ {
		sock := filepath.Join(dir, fmt.Sprintf("n%d.sock", i))
		argv := append(prefix(i), bin, "daemon", "-node", strconv.Itoa(i), "-peers", strings.Join(peers, ","),
			"-ppn", strconv.Itoa(ppn), "-spawn", "2", "-sock", sock, "-h", "20ms", "-delta", "500ms", "-hang", "1s", "--", bin, "daemon")
		dpids = append(dpids, p.start(fmt.Sprintf("node %d", i), 0, env, argv...).Process.Pid)
	}
	p.awaitKind("ready", n, 30*time.Second)
	attached := map[int]*exec.Cmd{}
	for i := 0; i < n; i++ {
		r := 3*i + 2
		sock := filepath.Join(dir, fmt.Sprintf("n%d.sock", i))
		attached[r] = p.start(fmt.Sprintf("rank %d", r), dpids[i], nil,
			append(prefix(i), bin, "daemon", "-attach", sock, "-rank", strconv.Itoa(r))...)
	}
	p.awaitKind("attached", n, 30*time.Second)
	time.Sleep(time.Second) // past the daemons' start grace, heartbeats flowing
	everyone := func(k string, attachedRanks ...int) map[string]bool {
		w := map[string]bool{}
		for i := 0; i < n; i++ {
			w[fmt.Sprintf("node %d: %s", i, k)] = false
		}
		for _, r := range attachedRanks {
			w[fmt.Sprintf("rank %d: %s", r, k)] = false
		}
		return w
	}

	t0 := node.Mono()
	syscall.Kill(pidByRank(t, dpids[1], 3), syscall.SIGKILL)
	last := p.await("rank 3 killed", everyone("proc 3 crashed", 2, 5, 8), 20*time.Second)
	t.Logf("rank 3 crashed: known everywhere %.1f ms after SIGKILL", float64(last-t0)/1e6)

	t0 = node.Mono()
	syscall.Kill(attached[5].Process.Pid, syscall.SIGSTOP)
	last = p.await("rank 5 stopped", everyone("proc 5 hung", 2, 8), 20*time.Second)
	t.Logf("rank 5 hung: known everywhere %.1f ms after SIGSTOP (hang time-out 1 s)", float64(last-t0)/1e6)

	t0 = node.Mono()
	syscall.Kill(-dpids[2], syscall.SIGKILL)
	w := map[string]bool{}
	for _, who := range []string{"node 0", "node 1", "rank 2"} {
		for _, k := range []string{"node 2", "proc 6 node_down", "proc 7 node_down", "proc 8 node_down"} {
			w[who+": "+k] = false
		}
	}
	last = p.await("node 2 killed", w, 20*time.Second)
	t.Logf("node 2 (daemon and 3 processes) killed: known by the survivors %.1f ms later (δ = 500 ms)", float64(last-t0)/1e6)
}

// TestDaemonPausedEvicted: a daemon SIGSTOPped for longer than δ is
// declared dead with its process; when it resumes it is told so (EVICTED),
// kills its child and exits, and no other node is suspected meanwhile
// (fail-stop: a resumed node must not act on stale knowledge).
func TestDaemonPausedEvicted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the vigil binary")
	}
	const n = 3
	dir := t.TempDir()
	bin := buildVigil(t, dir)
	peers := testnet.FreeAddrs(t, n)
	p := &procs{t: t, lines: make(chan line, 1024)}
	defer p.stop()
	env := []string{"VIGIL_DAEMON_KEY=00112233445566778899aabbccddeeff"}
	var ds []*exec.Cmd
	for i := 0; i < n; i++ {
		ds = append(ds, p.start(fmt.Sprintf("node %d", i), 0, env, bin, "daemon", "-node", strconv.Itoa(i),
			"-peers", strings.Join(peers, ","), "-ppn", "1", "-h", "20ms", "-delta", "500ms", "--", "sleep", "600"))
	}
	p.awaitKind("ready", n, 30*time.Second)
	time.Sleep(node.DefaultStartGrace + 500*time.Millisecond)
	child := pidByRank(t, ds[1].Process.Pid, 1)
	syscall.Kill(ds[1].Process.Pid, syscall.SIGSTOP)
	p.await("daemon 1 stopped", map[string]bool{"node 0: node 1": false, "node 0: proc 1 node_down": false,
		"node 2: node 1": false, "node 2: proc 1 node_down": false}, 20*time.Second)
	syscall.Kill(ds[1].Process.Pid, syscall.SIGCONT)
	exited := make(chan error, 1)
	go func() { exited <- ds[1].Wait() }()
	deadline := time.After(20 * time.Second)
	evicted := false
	for !evicted {
		select {
		case l := <-p.lines:
			switch {
			case l.Kind == "evicted" && l.who == "node 1":
				evicted = true
			case l.Kind == KindNode || l.Kind == KindProc:
				t.Fatalf("after the resume: unexpected %s: %s\n%s", l.who, key(l.Event), p.stderr())
			}
		case <-deadline:
			t.Fatalf("the resumed daemon was not evicted\n%s", p.stderr())
		}
	}
	select {
	case err := <-exited:
		if err == nil {
			t.Error("the evicted daemon exited with status 0")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the evicted daemon did not exit")
	}
	if err := syscall.Kill(child, 0); err == nil && !zombie(child) {
		t.Errorf("the evicted daemon's child %d still runs", child)
	}
	// The survivors keep their ring: no further suspicion for 1 s.
	select {
	case l := <-p.lines:
		if l.Kind == KindNode || l.Kind == KindProc {
			t.Errorf("survivors: unexpected %s: %s", l.who, key(l.Event))
		}
	case <-time.After(time.Second):
	}
}

// zombie reports whether pid has exited but is not reaped yet.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
