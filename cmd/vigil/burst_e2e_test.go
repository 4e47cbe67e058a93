package main

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
)

// envInt returns the integer environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// TestE2EBurst kills (or stops for longer than δ) k random ranks of n at the
// same instant: the ranks lost must be exactly the k hit, and every survivor
// must report them all.
func TestE2EBurst(t *testing.T) {
	n, k := envInt("VIGIL_BURST_N", 128), envInt("VIGIL_BURST_K", 16)
	stop := os.Getenv("VIGIL_BURST_MODE") == "stop"
	delta := 50 * time.Millisecond
	argv := []string{vigilBin, "agent", "-h", "10ms", "-delta", delta.String(), "-v", "-log-json"}
	logf, err := os.Create(os.Getenv("VIGIL_BURST_LOG"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	job, err := launch.Start(n, argv, launch.Options{Stderr: logf})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	early, err := job.WaitReady(ctx)
	if err != nil {
		job.Stop(time.Second)
		t.Fatal(err)
	}
	j := followJob(t, job, early)
	time.Sleep(2 * time.Second)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	hit := map[uint32]bool{}
	for len(hit) < k {
		hit[uint32(rng.IntN(n))] = true
	}
	sig := syscall.SIGKILL
	if stop {
		sig = syscall.SIGSTOP
	}
	t.Logf("burst at mono %d: %v", node.Mono(), hit)
	for r := range hit {
		j.signal(r, sig)
	}
	if stop {
		time.Sleep(120 * time.Millisecond)
		for r := range hit {
			j.signal(r, syscall.SIGCONT)
		}
	} else {
		for r := range hit {
			j.killed[r] = true
		}
	}
	time.Sleep(3 * time.Second)
	for d, by := range j.deadReports() {
		if !hit[d] {
			for r, l := range by {
				t.Errorf("rank %d reported live rank %d dead (detector %d)", r, d, l.Detector)
				break
			}
		}
	}
	if !t.Failed() {
		j.waitComplete(n, hit, 30*time.Second)
	}
}
