//go:build cgo && !novigilverbs

package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/verbs"
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

// With -transport verbs and no RDMA device, every agent says it uses TCP
// and why, and the job runs. (With a device, the rxe harness's detector
// run covers the verbs path.)
func TestVerbsFallsBackToTCP(t *testing.T) {
	if _, err := verbs.Devices(); !errors.Is(err, verbs.ErrNoDevice) {
		t.Skipf("this machine has an RDMA device (%v): the fallback cannot be shown here; rxe/detector.sh covers -transport verbs", err)
	}
	var stderr lockedBuffer
	job, err := launch.Start(2, []string{vigilBin, "agent", "-transport", "verbs"}, launch.Options{Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer job.Stop(3 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := job.WaitReady(ctx); err != nil {
		t.Fatalf("job over the tcp fallback not ready: %v\n%s", err, stderr.String())
	}
	out := stderr.String()
	if n := strings.Count(out, "verbs transport unavailable, using tcp"); n != 2 {
		t.Fatalf("%d of 2 agents explained the fallback:\n%s", n, out)
	}
	if !strings.Contains(out, "no RDMA device found") {
		t.Fatalf("the fallback message does not say why:\n%s", out)
	}
}
