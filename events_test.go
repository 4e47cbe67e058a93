package vigil_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil"
)

// TestEventsInSelectLoop uses Events as a user would, calling it in every
// iteration of a select loop: each event is received once (Events returns
// one channel; it used to return a new one per call that replayed every
// past event, so such a loop printed one death millions of times).
func TestEventsInSelectLoop(t *testing.T) {
	job, err := vigil.NewLocalJob(3)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	ds := make([]*vigil.Detector, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range ds {
		wg.Go(func() {
			cfg := vigil.DefaultConfig()
			cfg.Bootstrap, cfg.StartGrace = job.Bootstrap(r), 200*time.Millisecond
			cfg.SuspectTimeout = 200 * time.Millisecond // room for -race on a loaded machine
			ds[r], errs[r] = vigil.Join(context.Background(), cfg)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	defer ds[0].Close()
	defer ds[1].Close()
	if first, again := ds[0].Events(), ds[0].Events(); first != again {
		t.Fatal("Events returned two different channels")
	}
	ds[2].Close()

	got := map[int]int{} // rank → times received
	deadline := time.After(15 * time.Second)
	var quiet <-chan time.Time // after the first event: keep reading a while
loop:
	for {
		select {
		case ev := <-ds[0].Events():
			got[int(ev.Rank)]++
			if quiet == nil {
				quiet = time.After(500 * time.Millisecond)
			}
		case <-quiet:
			break loop
		case <-deadline:
			t.Fatal("rank 2's death not received in 15 s")
		}
	}
	if len(got) != 1 || got[2] != 1 {
		t.Fatalf("received %v (rank → times), want rank 2 once", got)
	}
	// The past is still there for a late look, without the channel.
	if dead := ds[0].Dead(); len(dead) != 1 || dead[0] != 2 {
		t.Fatalf("Dead() = %v, want [2]", dead)
	}
}

// TestJoinDoesNotWaitForEver: a rank whose peer never joins (it died
// before) gets an ErrBootstrap after JoinTimeout, even with a context
// without deadline, as a user's context.Background().
func TestJoinDoesNotWaitForEver(t *testing.T) {
	defer func(d time.Duration) { vigil.JoinTimeout = d }(vigil.JoinTimeout)
	vigil.JoinTimeout = 300 * time.Millisecond
	job, err := vigil.NewLocalJob(2)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	cfg := vigil.DefaultConfig()
	cfg.Bootstrap = job.Bootstrap(0)
	t0 := time.Now()
	d, err := vigil.Join(context.Background(), cfg)
	if err == nil {
		d.Close()
		t.Fatal("joined without rank 1")
	}
	if !errors.Is(err, vigil.ErrBootstrap) || time.Since(t0) > 10*time.Second {
		t.Fatalf("after %v: %v, want an ErrBootstrap after JoinTimeout", time.Since(t0), err)
	}
	t.Logf("after %v: %v", time.Since(t0).Round(time.Millisecond), err)
}
