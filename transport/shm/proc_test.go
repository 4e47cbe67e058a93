package shm

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// A peer's process is runnable while it runs or sleeps, not once stopped
// (SIGSTOP) or gone, and a process that got its id later is not taken
// for it.
func TestProcessRunnable(t *testing.T) {
	if _, ok := identify(0); ok {
		t.Fatal("pid 0 (another PID namespace) identified")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := int32(cmd.Process.Pid)
	p, ok := identify(pid)
	if !ok {
		t.Fatalf("identify(%d) failed", pid)
	}
	until := func(want bool, what string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); p.runnable() != want; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: runnable() = %v for 5 s, want %v", what, !want, want)
			}
		}
	}
	until(true, "sleeping")
	if (&process{pid: pid, start: p.start + 1}).runnable() {
		t.Fatal("a process with another start time taken for the peer")
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	until(false, "stopped")
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	until(true, "continued")
	cmd.Process.Kill()
	cmd.Wait()
	until(false, "killed")
}
