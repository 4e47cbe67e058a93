package pmix

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/mpitest"
	"github.com/vigil-hpc/vigil/launch"
)

// goBuild runs `go <args>` in the module and fails the test on error.
func goBuild(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...) // go test puts its own go first in PATH
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestMpirunExchange runs this test binary as 5 ranks under mpirun, built
// with -tags pmix (libpmix linked) and without (libpmix loaded with
// dlopen): every rank joins, exchanges addresses twice and prints what it
// learned; all must agree.
func TestMpirunExchange(t *testing.T) {
	mpitest.Need(t)
	for _, tags := range []string{"pmix", ""} {
		name := "linked"
		if tags == "" {
			name = "dlopen"
		}
		t.Run(name, func(t *testing.T) { mpirunExchange(t, tags) })
	}
}

func mpirunExchange(t *testing.T, tags string) {
	const n = 5
	bin := filepath.Join(t.TempDir(), "pmix.test")
	goBuild(t, "test", "-c", "-tags", tags, "-o", bin, ".")
	j := mpitest.Start(t, n, []string{helperEnv + "=1"}, nil, bin)
	deadline := time.After(90 * time.Second)
	reps := map[uint32]helperReport{}
	for len(reps) < n {
		l := j.Next(deadline, fmt.Sprintf("the reports of %d ranks (have %d)", n, len(reps)))
		var rep helperReport
		if err := json.Unmarshal([]byte(l.Text), &rep); err != nil {
			t.Fatalf("rank %d printed %q: %v", l.Rank, l.Text, err)
		}
		if int(rep.Rank) != l.Rank {
			t.Errorf("mpirun rank %d reports PMIx rank %d", l.Rank, rep.Rank)
		}
		if _, dup := reps[rep.Rank]; dup {
			t.Fatalf("rank %d reported twice", rep.Rank)
		}
		reps[rep.Rank] = rep
	}
	<-j.Exited()
	if !j.Cmd.ProcessState.Success() {
		t.Errorf("mpirun: %v\n%s", j.Cmd.ProcessState, j.Stderr())
	}
	r0 := reps[0]
	if r0.JobID != JobIDOf(r0.Namespace) {
		t.Errorf("job ID %x, want JobIDOf(%q) = %x", r0.JobID, r0.Namespace, JobIDOf(r0.Namespace))
	}
	for r := uint32(0); r < n; r++ {
		rep, ok := reps[r]
		if !ok {
			t.Fatalf("no report from rank %d", r)
		}
		if rep.Size != n || rep.Namespace != r0.Namespace || rep.JobID != r0.JobID || rep.KeyHash != r0.KeyHash {
			t.Errorf("rank %d: size %d ns %q job %x key %s; rank 0: size %d ns %q job %x key %s", r,
				rep.Size, rep.Namespace, rep.JobID, rep.KeyHash, r0.Size, r0.Namespace, r0.JobID, r0.KeyHash)
		}
		if len(rep.Nodes) != n {
			t.Errorf("rank %d: %d nodes, want %d", r, len(rep.Nodes), n)
		}
		for q, node := range rep.Nodes {
			// One machine: every rank is on this host.
			if node != reps[uint32(q)].Host && node != strings.Split(reps[uint32(q)].Host, ".")[0] {
				t.Errorf("rank %d says rank %d is on %q; it runs on %q", r, q, node, reps[uint32(q)].Host)
			}
		}
		if len(rep.Rounds) != 2 {
			t.Fatalf("rank %d: %d exchange rounds, want 2", r, len(rep.Rounds))
		}
		for i, addrs := range rep.Rounds {
			for q := uint32(0); q < n; q++ {
				if int(q) >= len(addrs) || addrs[q] != helperAddr(i, q) {
					t.Errorf("rank %d, round %d: table %q, want %q for rank %d", r, i, addrs, helperAddr(i, q), q)
					break
				}
			}
		}
	}
	t.Logf("namespace %q, job %x, nodes %v", r0.Namespace, r0.JobID, r0.Nodes)
}

// TestMpirunAgentKill is the PMIx end-to-end test: `mpirun -n 6 vigil
// agent` (vigil built with -tags pmix) runs one detector per process; one
// rank is killed with SIGKILL and every survivor must print the dead line
// for it; then the job is terminated with SIGTERM.
func TestMpirunAgentKill(t *testing.T) {
	mpitest.Need(t)
	const n, victim = 6, 3
	bin := filepath.Join(t.TempDir(), "vigil")
	goBuild(t, "build", "-tags", "pmix", "-o", bin, "github.com/vigil-hpc/vigil/cmd/vigil")
	j := mpitest.Start(t, n, nil, nil, bin, "agent", "-h", "20ms", "-delta", "1s")

	var mu sync.Mutex
	var all []launch.Line
	decode := func(l mpitest.Line) launch.Line {
		var ln launch.Line
		if err := json.Unmarshal([]byte(l.Text), &ln); err != nil {
			t.Fatalf("rank %d printed %q: %v", l.Rank, l.Text, err)
		}
		if int(ln.Rank) != l.Rank {
			t.Errorf("mpirun rank %d printed a line of rank %d", l.Rank, ln.Rank)
		}
		mu.Lock()
		all = append(all, ln)
		mu.Unlock()
		return ln
	}
	deadline := time.After(90 * time.Second)
	ready := map[uint32]bool{}
	for len(ready) < n {
		if ln := decode(j.Next(deadline, fmt.Sprintf("%d ready lines (have %d)", n, len(ready)))); ln.Ev == "ready" {
			ready[ln.Rank] = true
		}
	}
	pids := j.WaitPIDs(n, 10*time.Second)
	time.Sleep(500 * time.Millisecond) // past start-up: let the ring settle
	if err := syscall.Kill(pids[victim], syscall.SIGKILL); err != nil {
		t.Fatalf("killing rank %d (pid %d): %v", victim, pids[victim], err)
	}
	killed := time.Now()
	t.Logf("killed rank %d (pid %d)", victim, pids[victim])

	reported := map[uint32]launch.Line{}
	deadline = time.After(30 * time.Second)
	for len(reported) < n-1 {
		ln := decode(j.Next(deadline, fmt.Sprintf("the survivors' dead lines for rank %d (have %d of %d)", victim, len(reported), n-1)))
		switch {
		case ln.Ev == "dead" && ln.Dead == victim:
			if ln.Left {
				t.Errorf("rank %d reports rank %d left cleanly; it was killed", ln.Rank, victim)
			}
			if ln.Detector == victim {
				t.Errorf("rank %d says rank %d detected itself", ln.Rank, victim)
			}
			reported[ln.Rank] = ln
		case ln.Ev == "dead":
			t.Logf("rank %d reports rank %d dead (left=%v) — not the victim (a loaded machine?)", ln.Rank, ln.Dead, ln.Left)
		case ln.Ev == "evicted":
			t.Errorf("rank %d was evicted", ln.Rank)
		}
	}
	if _, ok := reported[victim]; ok {
		t.Errorf("the killed rank %d printed a dead line for itself", victim)
	}
	t.Logf("all %d survivors reported rank %d within %v", n-1, victim, time.Since(killed).Round(time.Millisecond))

	if !j.Terminate(30 * time.Second) {
		t.Fatalf("mpirun did not exit within 30 s of SIGTERM\n%s", j.Stderr())
	}
	for l := range j.Lines() {
		decode(l)
	}
	mu.Lock()
	defer mu.Unlock()
	bye := map[uint32]bool{}
	for _, ln := range all {
		if ln.Ev == "bye" {
			bye[ln.Rank] = true
		}
	}
	// mpirun forwards SIGTERM: every survivor leaves and says bye.
	for r := uint32(0); r < n; r++ {
		if r != victim && !bye[r] {
			t.Errorf("rank %d did not leave cleanly on SIGTERM (no bye line)", r)
		}
	}
}
