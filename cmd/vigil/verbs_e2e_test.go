package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil"
	"github.com/vigil-hpc/vigil/launch"
)

// lockedBuffer collects the agents' stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// With -transport verbs and no verbs transport (a binary built without
// -tags verbs, or no RDMA device), every agent says it uses TCP and why,
// and the job runs. (With a device, lab/rxe/detector.sh covers the verbs path.)
func TestVerbsFallsBackToTCP(t *testing.T) {
	var stderr lockedBuffer
	job, err := launch.Start(2, []string{vigilBin, "agent", "-transport", "verbs"}, launch.Options{Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Stop(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := job.WaitReady(ctx); err != nil {
		t.Fatalf("job not ready: %v\n%s", err, stderr.String())
	}
	out := stderr.String()
	n := strings.Count(out, "verbs transport unavailable, using tcp")
	if n == 0 && vigil.VerbsBuilt && vigil.HasRDMADevice() {
		t.Skip("this machine has an RDMA device: no fallback to show; lab/rxe/detector.sh covers -transport verbs")
	}
	if n != 2 {
		t.Fatalf("%d of 2 agents explained the fallback:\n%s", n, out)
	}
	// The test binary's TestMain builds vigil without tags: the reason is
	// the build, or (built with -tags verbs) the missing device.
	if !strings.Contains(out, "built without the verbs transport") && !strings.Contains(out, "no RDMA device found") {
		t.Fatalf("the fallback message does not say why:\n%s", out)
	}
}
