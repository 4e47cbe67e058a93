package vigil_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil"
	"github.com/vigil-hpc/vigil/bootstrap"
	"github.com/vigil-hpc/vigil/bootstrap/pmix"
)

// Bad configurations and a missing launcher give errors that say what to
// change, and leave nothing running.
func TestJoinRejectsBadConfig(t *testing.T) {
	job, err := vigil.NewLocalJob(1)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	for _, tc := range []struct {
		tweak func(*vigil.Config)
		want  string
	}{
		{func(c *vigil.Config) { c.Transport = "ib" }, `Config.Transport = "ib"`},
		{func(c *vigil.Config) { c.Heartbeat = "pigeon" }, `Config.Heartbeat = "pigeon"`},
		{func(c *vigil.Config) { c.SuspectTimeout = c.HeartbeatPeriod }, "SuspectTimeout"},
		{func(c *vigil.Config) { c.Broadcast = "flood" }, "Broadcast"},
		{func(c *vigil.Config) { c.Addresses.Include = "nosuchif0" }, "nosuchif0"},
	} {
		cfg := vigil.DefaultConfig()
		cfg.Bootstrap = job.Bootstrap(0)
		tc.tweak(&cfg)
		d, err := vigil.Join(context.Background(), cfg)
		if err == nil {
			d.Close()
			t.Fatalf("%s: accepted", tc.want)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %q does not name %q", err, tc.want)
		}
	}
}

func TestJoinWithoutLauncher(t *testing.T) {
	for _, v := range []string{bootstrap.EnvServer, pmix.EnvRank, pmix.EnvNamespace} {
		t.Setenv(v, "")
	}
	_, err := vigil.Join(context.Background(), vigil.DefaultConfig())
	if err == nil || !strings.Contains(err.Error(), "vigil run") || !strings.Contains(err.Error(), "mpirun") {
		t.Fatalf("want an error naming both launchers, got %v", err)
	}
}

// A clean departure through the root package is reported as one, over
// UDP heartbeats.
func TestJoinLeave(t *testing.T) {
	job, err := vigil.NewLocalJob(2)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	ds := make([]*vigil.Detector, 2)
	errs := make(chan error, 2)
	for r := range ds {
		go func() {
			cfg := vigil.DefaultConfig()
			cfg.Bootstrap, cfg.Heartbeat = job.Bootstrap(r), "udp"
			d, err := vigil.Join(context.Background(), cfg)
			ds[r] = d
			errs <- err
		}()
	}
	for range ds {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	defer ds[0].Close()
	if ds[0].Transport() != "tcp" || ds[0].Addr() == "" {
		t.Fatalf("transport %q, address %q", ds[0].Transport(), ds[0].Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ds[1].Leave(ctx, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ds[1].Close()
	select {
	case ev := <-ds[0].Events():
		if ev.Rank != 1 || !ev.Left {
			t.Fatalf("event %+v, want rank 1 departed", ev)
		}
	case <-ctx.Done():
		t.Fatal("departure not reported")
	}
}

// A rank that cannot choose its address fails at once, and the others do
// not wait for it until their time-out: they start, and report it dead.
func TestJoinFailureDoesNotHangTheOthers(t *testing.T) {
	job, err := vigil.NewLocalJob(3)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		d   *vigil.Detector
		err error
	}
	res := make([]chan result, 3)
	start := time.Now()
	for r := range 3 {
		res[r] = make(chan result, 1)
		go func() {
			cfg := vigil.DefaultConfig()
			cfg.Bootstrap, cfg.Heartbeat, cfg.StartGrace = job.Bootstrap(r), "udp", 300*time.Millisecond
			if r == 2 {
				cfg.Addresses.Bind = "192.0.2.1:0" // no interface has it: listening fails
			}
			d, err := vigil.Join(ctx, cfg)
			res[r] <- result{d, err}
		}()
	}
	if r := <-res[2]; r.err == nil {
		r.d.Close()
		t.Fatal("rank 2 joined without an address")
	}
	for r := range 2 {
		got := <-res[r]
		if got.err != nil {
			t.Fatalf("rank %d: %v", r, got.err)
		}
		defer got.d.Close()
		if r == 0 {
			select {
			case ev := <-got.d.Events():
				if ev.Rank != 2 || ev.Left {
					t.Fatalf("rank 0 reported %+v, want rank 2 crashed", ev)
				}
			case <-ctx.Done():
				t.Fatal("rank 0 never reported rank 2")
			}
		}
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %v: the others waited for the failed rank", took)
	}
}

// NewLocalJobHosts pretends hosts in one process: Join gives the detector
// the host labels, and a whole host crashing at once (its ranks closed
// without a LEAVE) is reported by every survivor, and nothing else, with
// a probe window of 1 so that the host's labels carry the mending.
func TestLocalJobHosts(t *testing.T) {
	const n, perHost = 6, 3
	if _, err := vigil.NewLocalJobHosts(n, -1); err == nil {
		t.Fatal("-1 ranks per host accepted")
	}
	job, err := vigil.NewLocalJobHosts(n, perHost)
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close()
	ds := make([]*vigil.Detector, n)
	errs := make(chan error, n)
	for r := range ds {
		go func() {
			cfg := vigil.DefaultConfig()
			cfg.Bootstrap, cfg.Heartbeat = job.Bootstrap(r), "udp"
			cfg.HeartbeatPeriod, cfg.SuspectTimeout, cfg.MendProbe = 20*time.Millisecond, 300*time.Millisecond, 1
			d, err := vigil.Join(context.Background(), cfg)
			ds[r] = d
			errs <- err
		}()
	}
	for range ds {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for r, d := range ds {
		if got := strings.Join(d.Hosts(), ","); got != "host0,host0,host0,host1,host1,host1" {
			t.Fatalf("rank %d's hosts %s", r, got)
		}
	}
	time.Sleep(200 * time.Millisecond)
	for r := perHost; r < n; r++ { // host 1 crashes
		ds[r].Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for r := range perHost {
		defer ds[r].Close()
		got, evs := map[int]bool{}, ds[r].Events()
		for len(got) < n-perHost {
			select {
			case ev := <-evs:
				if int(ev.Rank) < perHost || ev.Left {
					t.Fatalf("rank %d reported %+v, want the crash of a rank of host 1", r, ev)
				}
				got[int(ev.Rank)] = true
			case <-ctx.Done():
				t.Fatalf("rank %d learned only %v of host 1", r, got)
			}
		}
	}
}
