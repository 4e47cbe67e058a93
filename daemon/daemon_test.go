package daemon

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/testnet"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
)

// cluster starts n daemons on loopback in this process, each spawning
// `sleep 600` for its ppn ranks. δ is 1 s: the daemons share this process
// (and -race's slowdown) on a loaded machine. opts, if any, change each
// daemon's configuration before it starts.
func cluster(t *testing.T, n, ppn int, opts ...func(*Config)) ([]*Daemon, []string) {
	t.Helper()
	addrs := testnet.FreeAddrs(t, n)
	dir := t.TempDir()
	var ds []*Daemon
	var socks []string
	for i := 0; i < n; i++ {
		sock := filepath.Join(dir, fmt.Sprintf("n%d.sock", i))
		cfg := Config{Node: ranks.Rank(i), Layout: Layout{Nodes: n, PPN: ppn}, Peers: addrs,
			JobID: 7, Key: []byte("0123456789abcdef0123456789abcdef"),
			Config: node.Config{HeartbeatPeriod: 20 * time.Millisecond, SuspectTimeout: time.Second, StartGrace: 3 * time.Second},
			Socket: sock, Spawn: []string{"sleep", "600"}}
		for _, o := range opts {
			o(&cfg)
		}
		d, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
		socks = append(socks, sock)
		t.Cleanup(func() { d.Close() })
	}
	return ds, socks
}

// expect waits until c has delivered every event of want (kind, rank or
// node, cause), in any order, failing on any other event.
func expect(t *testing.T, who string, c <-chan Event, want map[string]bool, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for left := len(want); left > 0; {
		select {
		case ev, ok := <-c:
			if !ok {
				t.Fatalf("%s: event channel closed, still missing %v", who, want)
			}
			k := key(ev)
			done, ok := want[k]
			if !ok || done {
				t.Fatalf("%s: unexpected event %s (%+v)", who, k, ev)
			}
			want[k] = true
			left--
		case <-deadline:
			t.Fatalf("%s: timed out, have %v", who, want)
		}
	}
}

func key(ev Event) string {
	if ev.Kind == KindNode {
		return fmt.Sprintf("node %d", ev.Node)
	}
	return fmt.Sprintf("proc %d %s", ev.Rank, ev.Cause)
}

func want(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = false
	}
	return m
}

// pidOf returns the pid of local rank r of daemon d.
func pidOf(t *testing.T, d *Daemon, r ranks.Rank) int {
	t.Helper()
	pid, ok := d.Locals()[r]
	if !ok {
		t.Fatalf("no rank %d on node %d", r, d.Node())
	}
	return pid
}

// TestDaemonsInProcess: three daemons on loopback, each with two spawned
// processes and one process of this test attached over the socket. A
// SIGKILLed local process is reported crashed, a SIGSTOPped one hung, and
// a daemon's death reports the node and its processes, to every daemon and
// to the attached processes.
func TestDaemonsInProcess(t *testing.T) {
	const n, ppn = 3, 3
	ds, socks := cluster(t, n, ppn)
	var subs []<-chan Event
	for _, d := range ds {
		subs = append(subs, d.Events())
	}
	// Rank 3·i+2 of node i is spawned (sleep) and ranks 3·i, 3·i+1 too;
	// attach as rank 3·i+2 is refused (a spawned rank is another process).
	if _, err := Attach(socks[0], 2); err == nil {
		t.Fatal("attached as a rank the daemon spawned as another process")
	}
	if _, err := Attach(socks[0], 5); err == nil {
		t.Fatal("attached to node 0 as a rank of node 1")
	}
	time.Sleep(500 * time.Millisecond)

	kill := func(d *Daemon, r ranks.Rank, sig syscall.Signal) {
		if err := syscall.Kill(pidOf(t, d, r), sig); err != nil {
			t.Fatal(err)
		}
	}
	kill(ds[1], 3, syscall.SIGKILL)
	for i, c := range subs {
		expect(t, fmt.Sprintf("daemon %d", i), c, want("proc 3 crashed"), 10*time.Second)
	}
	kill(ds[0], 1, syscall.SIGSTOP)
	for i, c := range subs {
		expect(t, fmt.Sprintf("daemon %d", i), c, want("proc 1 hung"), 20*time.Second)
	}
	ds[2].Close() // kills its spawned processes: the node is gone
	for i, c := range subs[:2] {
		expect(t, fmt.Sprintf("daemon %d", i), c, want("node 2", "proc 6 node_down", "proc 7 node_down", "proc 8 node_down"), 10*time.Second)
	}
	if _, err := os.Stat(socks[2]); err == nil {
		t.Error("node 2's socket file outlived its daemon")
	}
}

// TestAttach: processes attach over the Unix socket (here, this test
// process as ranks 0 and 2, then 1, no spawned processes), keep their
// heartbeat words moving (no false hang in 1 s), and are told of a node's
// failure, past failures on attaching.
func TestAttach(t *testing.T) {
	addrs := testnet.FreeAddrs(t, 2)
	dir := t.TempDir()
	var ds []*Daemon
	for i := 0; i < 2; i++ {
		d, err := Start(Config{Node: ranks.Rank(i), Layout: Layout{Nodes: 2, PPN: 2}, Peers: addrs,
			JobID: 7, Key: []byte("0123456789abcdef0123456789abcdef"),
			Config: node.Config{HeartbeatPeriod: 20 * time.Millisecond, SuspectTimeout: time.Second, StartGrace: 3 * time.Second},
			Socket: filepath.Join(dir, fmt.Sprintf("n%d.sock", i)),
			// The attached process is this test: never kill it, and give
			// its heartbeat goroutine room under -race on a loaded machine.
			KeepHung: true, HangTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
		t.Cleanup(func() { d.Close() })
	}
	c0, err := Attach(filepath.Join(dir, "n0.sock"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close(true)
	if c0.Node() != 0 || c0.Layout() != (Layout{Nodes: 2, PPN: 2}) {
		t.Errorf("client sees node %d, layout %+v", c0.Node(), c0.Layout())
	}
	if _, err := Attach(filepath.Join(dir, "n0.sock"), 0); err == nil {
		t.Error("rank 0 attached twice")
	}
	c2, err := Attach(filepath.Join(dir, "n1.sock"), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(true)
	select {
	case ev := <-c0.Events():
		t.Fatalf("event without a failure: %+v", ev)
	case <-time.After(time.Second):
	}
	ds[1].Close()
	expect(t, "rank 0", c0.Events(), want("node 1", "proc 2 node_down", "proc 3 node_down"), 10*time.Second)
	if _, ok := <-c2.Events(); ok {
		t.Error("rank 2's connection carried an event after its daemon closed")
	}
	// A process attaching afterwards is told of the failure (the node's
	// from the detector's record, its processes' from Reported), here
	// through AttachFunc, whose Events carries nothing.
	late := make(chan Event, 16)
	c1, err := AttachFunc(filepath.Join(dir, "n0.sock"), 1, func(ev Event) { late <- ev })
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "rank 1, attached late", late, want("node 1", "proc 2 node_down", "proc 3 node_down"), 10*time.Second)
	c1.Close(true)
	if ev, ok := <-c1.Events(); ok {
		t.Errorf("AttachFunc's Events carried %+v", ev)
	}
}

// TestCloseWithSilentConnection: a local connection that never says hello
// neither blocks the daemon nor delays its Close.
func TestCloseWithSilentConnection(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "n0.sock")
	d, err := Start(Config{Layout: Layout{Nodes: 1, PPN: 1}, Peers: testnet.FreeAddrs(t, 1), JobID: 7,
		Key: []byte("0123456789abcdef0123456789abcdef"), Socket: sock})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := Attach(sock, 1); err == nil {
		t.Error("attached as rank 1 of a 1-rank job")
	}
	t0 := time.Now()
	d.Close()
	if el := time.Since(t0); el > 2*time.Second {
		t.Errorf("Close took %v with a silent connection open", el)
	}
}

// TestReattachAfterLeave: a process that leaves (Close(true)) may attach
// again at once, many times (the daemon forgets the old connection before
// closing it).
func TestReattachAfterLeave(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "n0.sock")
	d, err := Start(Config{Layout: Layout{Nodes: 1, PPN: 1}, Peers: testnet.FreeAddrs(t, 1), JobID: 7,
		Key: []byte("0123456789abcdef0123456789abcdef"), Socket: sock, KeepHung: true, HangTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := 0; i < 20; i++ {
		c, err := Attach(sock, 0)
		if err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		if err := c.Close(true); err != nil {
			t.Fatalf("leave %d: %v", i, err)
		}
		if !c.Closed() {
			t.Fatal("Closed() false after Close")
		}
	}
}

// TestEventsInSelectLoop calls Events in every iteration of a select loop,
// as a user would: the killed process is received once.
func TestEventsInSelectLoop(t *testing.T) {
	ds, _ := cluster(t, 2, 1)
	if first, again := ds[0].Events(), ds[0].Events(); first != again {
		t.Fatal("Events returned two different channels")
	}
	time.Sleep(500 * time.Millisecond)
	if err := syscall.Kill(pidOf(t, ds[1], 1), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	deadline := time.After(15 * time.Second)
	var quiet <-chan time.Time
loop:
	for {
		select {
		case ev := <-ds[0].Events():
			got[key(ev)]++
			if quiet == nil {
				quiet = time.After(500 * time.Millisecond)
			}
		case <-quiet:
			break loop
		case <-deadline:
			t.Fatal("the kill was not received in 15 s")
		}
	}
	if len(got) != 1 || got["proc 1 crashed"] != 1 {
		t.Fatalf("received %v (event → times), want proc 1 crashed once", got)
	}
}
