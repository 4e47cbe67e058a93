package daemon

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/mpitest"
)

// TestMpirunDaemons launches the daemons the way a cluster would, one per
// rank of a PMIx job: `mpirun -n 3 vigil daemon -ppn 2 -spawn 1 ... --
// vigil daemon` (vigil built with -tags pmix). Node index, job key and the
// daemons' addresses come from PMIx (Put/Commit/Fence/Get). Each daemon
// starts one child that attaches. A child SIGKILLed is reported crashed by
// every daemon; a daemon SIGKILLed (its child dies with it) is reported
// with both ranks its node hosts.
func TestMpirunDaemons(t *testing.T) {
	mpitest.Need(t)
	if testing.Short() {
		t.Skip("builds vigil and runs mpirun")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "vigil")
	if out, err := exec.Command("go", "build", "-tags", "pmix", "-o", bin, "../cmd/vigil").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags pmix ../cmd/vigil: %v\n%s", err, out)
	}
	const n = 3
	j := mpitest.Start(t, n, nil, nil, bin, "daemon", "-ppn", "2", "-spawn", "1", "-h", "20ms", "-delta", "500ms", "-hang", "2s",
		"-sock", filepath.Join(dir, "n{node}.sock"), "--", bin, "daemon")
	deadline := time.After(90 * time.Second)
	next := func(what string) line {
		l := j.Next(deadline, what)
		var ln line
		if err := json.Unmarshal([]byte(l.Text), &ln); err != nil {
			t.Fatalf("rank %d printed %q: %v", l.Rank, l.Text, err)
		}
		if int(ln.Self) != l.Rank {
			t.Fatalf("mpirun rank %d printed a line of daemon %d", l.Rank, ln.Self)
		}
		ln.who = fmt.Sprintf("node %d", ln.Self)
		return ln
	}
	pids := map[int]int{}
	for len(pids) < n {
		if ln := next("the daemons' ready lines"); ln.Kind == "ready" {
			pids[int(ln.Node)] = ln.Pid
		}
	}
	// Each daemon started its child (rank 2·node) before printing ready.
	time.Sleep(2500 * time.Millisecond) // past the ring's start grace
	await := func(what string, want map[string]bool) {
		t.Helper()
		for left := len(want); left > 0; {
			ln := next(what)
			if ln.Kind != KindNode && ln.Kind != KindProc {
				continue
			}
			k := ln.who + ": " + key(ln.Event)
			if seen, ok := want[k]; !ok || seen {
				t.Fatalf("%s: unexpected %s", what, k)
			}
			want[k] = true
			left--
		}
	}
	t0 := time.Now()
	syscall.Kill(pidByRank(t, pids[0], 0), syscall.SIGKILL)
	await("rank 0 killed", map[string]bool{"node 0: proc 0 crashed": false, "node 1: proc 0 crashed": false, "node 2: proc 0 crashed": false})
	t.Logf("rank 0 (a daemon's child) SIGKILLed: reported by every daemon in %v", time.Since(t0))
	t0 = time.Now()
	syscall.Kill(pids[1], syscall.SIGKILL)
	w := map[string]bool{}
	for _, who := range []string{"node 0", "node 2"} {
		for _, k := range []string{"node 1", "proc 2 node_down", "proc 3 node_down"} {
			w[who+": "+k] = false
		}
	}
	await("daemon 1 killed", w)
	t.Logf("daemon 1 SIGKILLed: node 1 and ranks 2, 3 reported by the survivors in %v", time.Since(t0))
}
