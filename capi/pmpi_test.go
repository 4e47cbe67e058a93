package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/mpitest"
)

// The PMPI tests run csrc/pmpi/examples/pmpi_ring.c, an MPI program that
// knows nothing of Vigil, with csrc/pmpi/vigil_pmpi.c interposed: preloaded
// (LD_PRELOAD) or linked before the MPI library.

// needMPICC returns mpicc's path or skips the test.
func needMPICC(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("mpicc")
	if err != nil {
		t.Skipf("mpicc is not installed (%v); install libopenmpi-dev to run the PMPI tests", err)
	}
	return p
}

// pmpiBuild builds the PMPI library (shared) against libvigil in libDir and
// pmpi_ring, plain (for LD_PRELOAD) or linked with the PMPI library.
func pmpiBuild(t *testing.T, libDir string, linked bool) (shim, prog string) {
	t.Helper()
	mpicc := needMPICC(t)
	dir := t.TempDir()
	shim = filepath.Join(dir, "libvigil_pmpi.so")
	prog = filepath.Join(dir, "pmpi_ring")
	cflags := []string{"-O2", "-g", "-Wall", "-Wextra", "-Werror"}
	run := func(args ...string) {
		if out, err := exec.Command(mpicc, append(slicesClone(cflags), args...)...).CombinedOutput(); err != nil {
			t.Fatalf("mpicc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("-fPIC", "-shared", "-I../csrc", "-o", shim, "../csrc/pmpi/vigil_pmpi.c", "-L"+libDir, "-lvigil", "-Wl,-rpath,"+libDir)
	if linked {
		run("-o", prog, "../csrc/pmpi/examples/pmpi_ring.c", "-L"+dir, "-lvigil_pmpi", "-L"+libDir, "-lvigil",
			"-Wl,-rpath,"+dir+":"+libDir)
		out, _ := exec.Command("ldd", prog).Output()
		if !strings.Contains(string(out), "libvigil_pmpi.so") {
			t.Fatalf("pmpi_ring is not linked with libvigil_pmpi.so:\n%s", out)
		}
	} else {
		run("-o", prog, "../csrc/pmpi/examples/pmpi_ring.c")
	}
	return shim, prog
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// pmpiLine is a JSON line of the PMPI library or of pmpi_ring.
type pmpiLine struct {
	V          int    `json:"v"`
	Ev         string `json:"ev"`
	Rank       uint32 `json:"rank"`
	Dead       uint32 `json:"dead"`
	Left       bool   `json:"left"`
	Detector   uint32 `json:"detector"`
	Mode       string `json:"mode"`
	Iterations int    `json:"iterations"`
}

func decodePMPI(t *testing.T, l mpitest.Line) pmpiLine {
	t.Helper()
	var p pmpiLine
	if err := json.Unmarshal([]byte(l.Text), &p); err != nil {
		t.Fatalf("rank %d printed %q: %v", l.Rank, l.Text, err)
	}
	if (p.Ev == "ready" || p.Ev == "dead" || p.Ev == "evicted") && p.V != 1 {
		t.Fatalf("rank %d printed %q: the library's lines carry \"v\":1", l.Rank, l.Text)
	}
	return p
}

// pmpiKill runs pmpi_ring as n ranks in the given mode, kills victim once
// every rank's detector is ready, and checks that every survivor reports
// it (in sporadic mode each survivor detects it itself, by probing).
func pmpiKill(t *testing.T, mode string, linked bool, extraEnv ...string) {
	pmpiKillRun(t, mode, linked, "", extraEnv...)
}

// pmpiKillRun is pmpiKill with pmpi_ring's optional loop ("barrier": the
// survivors wait for the dead rank in MPI_Barrier).
func pmpiKillRun(t *testing.T, mode string, linked bool, loop string, extraEnv ...string) {
	shim, prog := pmpiBuild(t, lib(t, ""), linked)
	const n, victim = 5, 1
	env := []string{"VIGIL_PMPI_MODE=" + mode, "VIGIL_PMPI_OUTPUT=json", "VIGIL_H=20ms", "VIGIL_DELTA=1s",
		"VIGIL_PMPI_TIMEOUT=300ms"}
	env = append(env, extraEnv...)
	var extra []string
	for _, e := range env {
		extra = append(extra, "-x", e)
	}
	if !linked {
		extra = append(extra, "-x", "LD_PRELOAD="+shim)
	}
	args := []string{prog, "1000000"}
	if mode == "sporadic" || loop != "" {
		args = append(args, "thread") // MPI_Init_thread
	}
	if loop != "" {
		args = append(args, loop)
	}
	j := mpitest.Start(t, n, nil, extra, args...)
	deadline := time.After(90 * time.Second)
	for ready := 0; ready < n; {
		switch p := decodePMPI(t, j.Next(deadline, "the detectors' ready lines")); p.Ev {
		case "ready":
			if p.Mode != mode {
				t.Fatalf("rank %d runs mode %q, want %q", p.Rank, p.Mode, mode)
			}
			ready++
		case "dead":
			t.Errorf("before any failure: %+v", p)
		}
	}
	pids := j.WaitPIDs(n, 10*time.Second)
	time.Sleep(500 * time.Millisecond) // the ranks are exchanging messages
	if err := syscall.Kill(pids[victim], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := map[uint32]bool{}
	for len(got) < n-1 {
		p := decodePMPI(t, j.Next(deadline, fmt.Sprintf("the survivors' reports of rank %d (have %v)", victim, got)))
		switch {
		case p.Ev == "dead" && p.Dead == victim && !p.Left:
			if mode == "sporadic" && p.Detector != p.Rank {
				t.Errorf("sporadic mode: rank %d learned of rank %d from rank %d; each rank detects by itself", p.Rank, victim, p.Detector)
			}
			got[p.Rank] = true
		case p.Ev == "dead" || p.Ev == "evicted":
			t.Errorf("unexpected report: %+v", p)
		}
	}
}

// TestPMPISporadicCollective: the sporadic detector with every survivor
// blocked in MPI_Barrier on the dead rank: a collective's waiters probe
// round the communicator, so each of them reaches it, not only its
// predecessor.
func TestPMPISporadicCollective(t *testing.T) { pmpiKillRun(t, "sporadic", true, "barrier") }

// TestPMPIRingPreload: the periodic ring detector, preloaded.
func TestPMPIRingPreload(t *testing.T) { pmpiKill(t, "ring", false) }

// TestPMPISporadicLinked: the sporadic detector, linked at build time; the
// survivors, blocked in MPI_Waitall on the dead rank, probe it.
func TestPMPISporadicLinked(t *testing.T) { pmpiKill(t, "sporadic", true) }

// TestPMPINoFailure: without failures both modes run the program to its
// end, report nothing and leave cleanly in MPI_Finalize.
func TestPMPINoFailure(t *testing.T) {
	shim, prog := pmpiBuild(t, lib(t, ""), false)
	for _, mode := range []string{"ring", "sporadic"} {
		const n = 4
		extra := []string{"-x", "LD_PRELOAD=" + shim, "-x", "VIGIL_PMPI_MODE=" + mode, "-x", "VIGIL_PMPI_OUTPUT=json",
			"-x", "VIGIL_H=20ms", "-x", "VIGIL_DELTA=1s", "-x", "VIGIL_PMPI_TIMEOUT=500ms"}
		j := mpitest.Start(t, n, nil, extra, prog, "150")
		ready, done := 0, false
		for l := range j.Lines() {
			switch p := decodePMPI(t, l); {
			case p.Ev == "ready":
				ready++
			case p.Ev == "done":
				done = p.Iterations == 150
			case p.Ev == "dead" && !p.Left, p.Ev == "evicted":
				t.Errorf("%s mode, no failure: %+v", mode, p)
			}
		}
		if ready != n || !done || !j.Cmd.ProcessState.Success() {
			t.Errorf("%s mode: %d ready lines, done=%v, mpirun %v\n%s", mode, ready, done, j.Cmd.ProcessState, j.Stderr())
		}
	}
}

// TestPMPIAbortPolicy: with VIGIL_PMPI_ON_FAILURE=abort a survivor blocked
// on the dead rank aborts the job, so mpirun ends by itself.
func TestPMPIAbortPolicy(t *testing.T) {
	shim, prog := pmpiBuild(t, lib(t, ""), false)
	const n, victim = 4, 2
	extra := []string{"-x", "LD_PRELOAD=" + shim, "-x", "VIGIL_PMPI_OUTPUT=json", "-x", "VIGIL_PMPI_ON_FAILURE=abort",
		"-x", "VIGIL_H=20ms", "-x", "VIGIL_DELTA=1s"}
	j := mpitest.Start(t, n, nil, extra, prog, "1000000")
	deadline := time.After(90 * time.Second)
	for ready := 0; ready < n; {
		if decodePMPI(t, j.Next(deadline, "ready lines")).Ev == "ready" {
			ready++
		}
	}
	pids := j.WaitPIDs(n, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	syscall.Kill(pids[victim], syscall.SIGKILL)
	select {
	case <-j.Exited():
	case <-time.After(60 * time.Second):
		t.Fatalf("the job did not abort within 60 s of the failure\n%s", j.Stderr())
	}
	if j.Cmd.ProcessState.Success() {
		t.Errorf("mpirun succeeded after an abort")
	}
	if !strings.Contains(j.Stderr(), "aborting the job") {
		t.Errorf("no survivor said it aborted:\n%s", j.Stderr())
	}
}

// TestPMPIRingCorrectedTree: the ring detector preloaded with
// VIGIL_BROADCAST=ctree and VIGIL_GOSSIP_F=2 (the PMPI library's
// environment reaches vigil_config): every survivor reports the victim.
func TestPMPIRingCorrectedTree(t *testing.T) {
	pmpiKill(t, "ring", false, "VIGIL_BROADCAST=ctree", "VIGIL_GOSSIP_F=2")
}

// TestPMPIBadPropagation: an unknown VIGIL_BROADCAST, or a VIGIL_GOSSIP_F
// out of range, makes every rank's vigil_init fail with a message naming
// the field and its variable; the program still runs to its end, without
// failure detection.
func TestPMPIBadPropagation(t *testing.T) {
	shim, prog := pmpiBuild(t, lib(t, ""), false)
	for _, c := range []struct{ env, want string }{
		{"VIGIL_BROADCAST=flood", `vigil_config.broadcast = "flood"`},
		{"VIGIL_GOSSIP_F=4", "vigil_config.gossip_f = 4: want 1 to 3"},
	} {
		const n = 2
		extra := []string{"-x", "LD_PRELOAD=" + shim, "-x", "VIGIL_PMPI_OUTPUT=json", "-x", c.env}
		j := mpitest.Start(t, n, nil, extra, prog, "50")
		done := false
		for l := range j.Lines() {
			switch p := decodePMPI(t, l); p.Ev {
			case "ready", "dead", "evicted":
				t.Errorf("%s: %+v", c.env, p)
			case "done":
				done = p.Iterations == 50
			}
		}
		stderr := j.Stderr()
		if !done || !j.Cmd.ProcessState.Success() || strings.Count(stderr, c.want) != n ||
			!strings.Contains(stderr, "(set from VIGIL_BROADCAST and VIGIL_GOSSIP_*); running without failure detection") {
			t.Errorf("%s: done=%v, mpirun %v; want %d ranks to say %q:\n%s", c.env, done, j.Cmd.ProcessState, n, c.want, stderr)
		}
	}
}
