package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/mpitest"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
)

// TestMultiHostPartition cuts a job of `vigil agent` (PMIx, two ranks per
// simulated host placed round-robin, h = 20 ms, δ = 500 ms, the default
// -partition=failstop) in two with mpitest.Hosts.Split: the hosts of one
// side reach each other and nothing else. Each agent runs under sh, which
// prints its exit status. Then:
//
//   - 3 + 2 hosts: the 2 hosts (4 ranks of 10) are the minority;
//   - 2 + 2 hosts: a tie (4 ranks | 4), which goes to the side holding
//     rank 0; the side cut off from mpirun is the other one.
//
// During the cut, the side that must stop has no agent left within 6δ
// (watched from outside, by its processes), while every rank of the other
// side runs on and reports exactly the stopped side's ranks. After the
// heal (2δ later at least), the stopped ranks' lines arrive: an evicted
// line with reason "minority partition" printed before the heal, and exit
// status 3; 4δ after the heal nothing has changed: the other side runs, no
// rank of it stopped, was reported or reported anything more.
func TestMultiHostPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun across network namespaces")
	}
	mpitest.NeedHosts(t)
	for _, tc := range []struct {
		name string
		nh   int
		cut  []int // host indexes of the side cut off from mpirun, which must stop
	}{
		{"3+2 hosts", 5, []int{3, 4}},
		{"2+2 hosts, tie", 4, []int{2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) { partitionJob(t, tc.nh, tc.cut) })
	}
}

// partitionJob runs one job of TestMultiHostPartition.
func partitionJob(t *testing.T, nh int, cut []int) {
	const ppn, h, delta = 2, 20 * time.Millisecond, 500 * time.Millisecond
	n := nh * ppn
	bin := pmixVigil(t)
	hosts := mpitest.NewHosts(t, nh)
	start := time.Now()
	j := hosts.Start(t, n, ppn, nil, []string{"--map-by", "node"},
		"sh", "-c", `"$0" "$@"; echo "exit status $?" >&2`, bin, "agent", "-h", h.String(), "-delta", delta.String())
	m := newMHJob(t, j)
	m.awaitReady(n)
	ready := node.Mono()
	_, hostOf := hosts.WaitPIDs(n, 10*time.Second)
	gone, survivors := map[uint32]bool{}, map[uint32]bool{}
	exempt := map[uint32]int64{}
	var stopHosts, goHosts []int
	for i := range nh {
		if slices.Contains(cut, i) {
			stopHosts = append(stopHosts, i)
		} else {
			goHosts = append(goHosts, i)
		}
	}
	for r := range uint32(n) {
		if slices.Contains(cut, hostOf[int(r)]) {
			gone[r] = true
		} else {
			survivors[r] = true
		}
	}
	if gone[0] || 2*len(gone) > n {
		t.Fatalf("ranks %v cut off: the test wants the side to stop to hold at most half and not rank 0", keys(gone))
	}
	t.Logf("%d ranks on %d hosts ready after %v; hosts %v (ranks %v) to be cut off from hosts %v (ranks %v)",
		n, nh, time.Since(start).Round(time.Millisecond), stopHosts, keys(gone), goHosts, keys(survivors))
	// Past the start grace (2 s + δ from each rank's start).
	time.Sleep(time.Duration(ready+int64(2*time.Second+2*delta)-node.Mono()) + 300*time.Millisecond)

	t0 := node.Mono()
	hosts.Split(cut...)
	for r := range gone {
		exempt[r] = t0 // a cut-off rank reports the other side until it stops
	}
	// The cut-off side stops: no agent process left on its hosts.
	var stopped time.Duration
	for {
		left := agentsOn(hosts, bin, stopHosts)
		stopped = time.Duration(node.Mono() - t0)
		if len(left) == 0 {
			break
		}
		if stopped > 10*delta {
			t.Fatalf("%v after the cut, ranks %v of the cut-off side still run", stopped, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if stopped > 6*delta {
		t.Errorf("the cut-off side stopped %v after the cut, beyond 6δ = %v", stopped, 6*delta)
	}
	m.await("the other side reports the cut-off side", 10*time.Second, func() string { return m.missing(gone, survivors) })
	first, last := m.timing(t0, keys(gone), survivors)
	// The cut lasts at least 2δ more; the other side runs on meanwhile.
	time.Sleep(max(2*delta, time.Duration(t0+int64(8*delta)-node.Mono())))
	if run := agentsOn(hosts, bin, goHosts); len(run) != len(survivors) {
		t.Fatalf("during the cut, ranks %v run on the other side, want %v", run, keys(survivors))
	}
	m.check("during the cut", gone, survivors, exempt)
	held := time.Duration(node.Mono() - t0)
	hosts.Rejoin()
	healed := node.Mono()

	// The stopped side's lines come in over the healed link.
	m.await("the cut-off ranks' stop lines", 30*time.Second, func() string {
		for r := range gone {
			if _, ok := m.stops[r]; !ok {
				return fmt.Sprintf("no evicted line from rank %d", r)
			}
		}
		return ""
	})
	statuses := func() map[string]int {
		out := map[string]int{}
		for _, l := range strings.Split(j.Stderr(), "\n") {
			if _, st, ok := strings.Cut(l, "<stderr>:exit status "); ok {
				out[st]++
			}
		}
		return out
	}
	m.await("the cut-off ranks' exit statuses", 10*time.Second, func() string {
		if st := statuses(); st[strconv.Itoa(ExitMinority)] < len(gone) {
			return fmt.Sprintf("exit statuses %v, want %d × %d", st, len(gone), ExitMinority)
		}
		return ""
	})
	var stopLines []string
	m.mu.Lock()
	for _, r := range keys(gone) {
		ln := m.stops[r]
		at := time.Duration(ln.Mono - t0)
		stopLines = append(stopLines, fmt.Sprintf("%d at %v", r, at.Round(time.Millisecond)))
		switch {
		case ln.Reason != launch.ReasonMinority:
			t.Errorf("rank %d stopped with reason %q, want %q", r, ln.Reason, launch.ReasonMinority)
		case ln.Mono <= t0 || ln.Mono >= healed:
			t.Errorf("rank %d stopped %v after the cut, not during it (healed after %v)", r, at, held)
		}
	}
	m.mu.Unlock()

	// Nothing changes after the heal.
	time.Sleep(4 * delta)
	if run := agentsOn(hosts, bin, goHosts); len(run) != len(survivors) {
		t.Fatalf("after the heal, ranks %v run on the other side, want %v", run, keys(survivors))
	}
	if st := statuses(); len(st) != 1 || st[strconv.Itoa(ExitMinority)] != len(gone) {
		t.Fatalf("after the heal, exit statuses %v, want only %d × %d", st, len(gone), ExitMinority)
	}
	m.mu.Lock()
	for r := range survivors {
		if m.evicted[r] {
			t.Errorf("rank %d of the side that goes on stopped (%+v)", r, m.stops[r])
		}
	}
	m.mu.Unlock()
	m.check("after the heal", gone, survivors, exempt)
	t.Logf("cut for %v: the cut-off side's agents all gone %v after the cut (their evicted lines, reason %q: %s); the other side reported them after %v (first) and %v (all %d); after the heal nothing changed",
		held.Round(time.Millisecond), stopped.Round(time.Millisecond), launch.ReasonMinority, strings.Join(stopLines, ", "),
		first.Round(time.Millisecond), last.Round(time.Millisecond), len(survivors))
	j.Terminate(10 * time.Second)
}

// agentsOn returns the ranks whose agent (bin, not the sh around it) runs
// on the hosts hs.
func agentsOn(hosts *mpitest.Hosts, bin string, hs []int) []int {
	var out []int
	for _, i := range hs {
		for _, pid := range hosts.PIDs(i) {
			cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if err != nil || !bytes.HasPrefix(cmd, append([]byte(bin), 0)) {
				continue
			}
			env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			for _, kv := range bytes.Split(env, []byte{0}) {
				if v, ok := bytes.CutPrefix(kv, []byte("PMIX_RANK=")); ok {
					if r, err := strconv.Atoi(string(v)); err == nil {
						out = append(out, r)
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
