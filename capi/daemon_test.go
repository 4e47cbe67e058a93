package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/mpitest"
)

// Seed 004's stand-alone detector: the MPI program (pmpi_ring, with the
// PMPI library preloaded in VIGIL_PMPI_MODE=daemon) runs no detector of
// its own; each rank attaches to its node's `vigil daemon` (two daemons on
// this machine play two nodes of two ranks each) and is told of failures
// over the daemon's Unix socket.

// startDaemons builds cmd/vigil and starts n daemons on loopback with ppn
// ranks each; it returns the socket pattern ({node}) for VIGIL_DAEMON_SOCK
// and the daemons.
func startDaemons(t *testing.T, n, ppn int) (string, []*exec.Cmd) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "vigil")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/vigil").CombinedOutput(); err != nil {
		t.Fatalf("go build ../cmd/vigil: %v\n%s", err, out)
	}
	var addrs []string
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		ln.Close()
	}
	var ds []*exec.Cmd
	for i := 0; i < n; i++ {
		sock := filepath.Join(dir, fmt.Sprintf("n%d.sock", i))
		cmd := exec.Command(bin, "daemon", "-node", fmt.Sprint(i), "-peers", strings.Join(addrs, ","),
			"-ppn", fmt.Sprint(ppn), "-sock", sock, "-h", "20ms", "-delta", "500ms", "-hang", "2s")
		cmd.Env = append(os.Environ(), "VIGIL_DAEMON_KEY=00112233445566778899aabbccddeeff")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, cmd)
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for k := 0; ; k++ { // the socket exists once the daemon listens
			if _, err := os.Stat(sock); err == nil {
				break
			}
			if k == 200 {
				t.Fatalf("daemon %d did not create %s", i, sock)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return filepath.Join(dir, "n{node}.sock"), ds
}

// TestPMPIDaemonMode: under mpirun, 4 ranks on 2 "nodes". SIGKILL of rank
// 1: its daemon (node 0) sees it end through a pidfd and every survivor is
// told. Then node 1 dies whole (its daemon and ranks 2 and 3, SIGKILL):
// daemon 0 detects the daemon's silence and reports both ranks to rank 0.
func TestPMPIDaemonMode(t *testing.T) {
	shim, prog := pmpiBuild(t, lib(t, ""), false)
	const n, ppn = 4, 2
	pattern, ds := startDaemons(t, n/ppn, ppn)
	extra := []string{"-x", "LD_PRELOAD=" + shim, "-x", "VIGIL_PMPI_MODE=daemon", "-x", "VIGIL_PMPI_OUTPUT=json",
		"-x", "VIGIL_DAEMON_SOCK=" + pattern, "-x", fmt.Sprintf("VIGIL_DAEMON_PPN=%d", ppn)}
	j := mpitest.Start(t, n, nil, extra, prog, "1000000")
	deadline := time.After(90 * time.Second)
	for ready := 0; ready < n; {
		switch p := decodePMPI(t, j.Next(deadline, "the ranks' ready lines")); p.Ev {
		case "ready":
			if p.Mode != "daemon" {
				t.Fatalf("rank %d runs mode %q", p.Rank, p.Mode)
			}
			ready++
		case "dead":
			t.Errorf("before any failure: %+v", p)
		}
	}
	pids := j.WaitPIDs(n, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	expect := func(what string, want map[[2]uint32]bool) {
		t.Helper()
		for left := len(want); left > 0; {
			p := decodePMPI(t, j.Next(deadline, what))
			if p.Ev != "dead" && p.Ev != "evicted" {
				continue
			}
			k := [2]uint32{p.Rank, p.Dead}
			if done, ok := want[k]; !ok || done || p.Left {
				t.Fatalf("%s: unexpected %+v", what, p)
			}
			want[k] = true
			left--
		}
	}
	t0 := time.Now()
	syscall.Kill(pids[1], syscall.SIGKILL)
	expect("rank 1's failure", map[[2]uint32]bool{{0, 1}: false, {2, 1}: false, {3, 1}: false})
	t.Logf("rank 1 (SIGKILL) reported to ranks 0, 2, 3 in %v", time.Since(t0))

	t0 = time.Now()
	ds[1].Process.Kill()
	syscall.Kill(pids[2], syscall.SIGKILL)
	syscall.Kill(pids[3], syscall.SIGKILL)
	expect("node 1's failure", map[[2]uint32]bool{{0, 2}: false, {0, 3}: false})
	t.Logf("node 1 (daemon and ranks 2, 3, SIGKILL) reported to rank 0 in %v", time.Since(t0))
}

// TestCDaemonCheck runs csrc/tests/daemoncheck.c (the contract of
// vigil_init_daemon: errors, refusals, start, leave, re-attach) against two
// daemons, with libvigil shared and static.
func TestCDaemonCheck(t *testing.T) {
	dir := lib(t, "")
	pattern, _ := startDaemons(t, 2, 2)
	sock := strings.ReplaceAll(pattern, "{node}", "0")
	for i, static := range []bool{false, true} {
		bin := compileC(t, dir, "tests/daemoncheck.c", static)
		cmd := exec.Command(bin, sock, fmt.Sprint(i)) // a fresh rank per run
		cmd.Env = append(os.Environ(), "VIGIL_DAEMON_SOCK=/nonexistent/n{node}.sock", "VIGIL_DAEMON_PPN=2")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), " 0 failures") {
			t.Errorf("daemoncheck (static=%v): %v\n%s", static, err, out)
		} else {
			t.Logf("static=%v: %s", static, strings.TrimSpace(string(out)))
		}
	}
}

// TestDaemonSocket: how vigil_init_daemon finds the socket.
func TestDaemonSocket(t *testing.T) {
	t.Setenv("VIGIL_DAEMON_SOCK", "")
	if _, err := daemonSocket("", 0); err == nil || !strings.Contains(err.Error(), "VIGIL_DAEMON_SOCK") {
		t.Errorf("no socket: %v", err)
	}
	t.Setenv("VIGIL_DAEMON_SOCK", "/run/n{node}.sock")
	t.Setenv("VIGIL_DAEMON_PPN", "")
	if _, err := daemonSocket("", 0); err == nil || !strings.Contains(err.Error(), "VIGIL_DAEMON_PPN") {
		t.Errorf("{node} without VIGIL_DAEMON_PPN: %v", err)
	}
	t.Setenv("VIGIL_DAEMON_PPN", "4")
	if p, err := daemonSocket("", 9); err != nil || p != "/run/n2.sock" {
		t.Errorf("rank 9, 4 per node: %q, %v", p, err)
	}
	if p, err := daemonSocket("/x.sock", 9); err != nil || p != "/x.sock" {
		t.Errorf("explicit path: %q, %v", p, err)
	}
}
