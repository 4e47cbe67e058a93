package bench

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/hostile"
)

// TestHostileShort runs the hostile checks briefly against real agents: a
// 2 s flood at agent 1's UDP port (default shared-memory heartbeats) with
// no report and the drops counted in its metrics; the same from the
// forged address of the emitter agent 1 watches, over shared memory and
// UDP, every datagram counted; and two pairs of kills
// of a rank and its observer, with and without the replay of the rank's
// captured heartbeats to its new observer, reported no later with the
// replay than one check after the later run without.
func TestHostileShort(t *testing.T) {
	if testing.Short() {
		t.Skip("builds vigil and starts agents")
	}
	cfg := HostileConfig{VigilBin: buildVigil(t), N: 4, H: 10 * time.Millisecond, Delta: 50 * time.Millisecond,
		Heartbeat: "shm", Flood: 2 * time.Second, Runs: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	floods, err := HostileFlood(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range floods {
		t.Logf("flood: %+v", r)
		if !r.OK() || r.Sent == 0 {
			t.Errorf("flood run %d: %d reports, %.0f kernel drops, rejected %v", r.Run, r.Reports, r.KernelDrops, r.Rejected)
		}
	}
	c, err := hostile.StartCapture("lo", netip.MustParseAddrPort("127.0.0.1:1"))
	if err != nil {
		t.Skipf("the flood passed; the forged-source flood and the replay need CAP_NET_RAW: %v", err)
	}
	c.Stop()
	// From the watched emitter's forged address, at full rate: the
	// emitter's socket filter drops the forgeries, which do not know its
	// incarnation, in the kernel, counted there.
	for _, mode := range []string{"shm", "udp"} {
		spoof := cfg
		spoof.Heartbeat, spoof.Spoof = mode, true
		rows, err := HostileFlood(ctx, spoof)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			t.Logf("forged-source flood, %s: %+v", mode, r)
			if !r.OK() || r.Sent == 0 || sumRejected(r.Rejected)+r.KernelDrops < 0.9*float64(r.Sent) {
				t.Errorf("forged-source flood over %s: %d sent, %d reports, %.0f kernel drops, rejected %v", mode, r.Sent, r.Reports, r.KernelDrops, r.Rejected)
			}
		}
	}
	// Two pairs, alternated: the limit counts from the later of the two
	// runs without the replay (one pair alone on a loaded 2-core host is
	// within its own noise, 10-20 ms).
	cfg.Heartbeat, cfg.Runs = "udp", 2
	replays, err := HostileReplay(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	limit := replayLimit(replays, cfg.checkPeriod())
	for _, r := range replays {
		t.Logf("replay: %+v", r)
		if !r.OK(limit) || (r.Replay && (r.Replayed == 0 || r.Rejected["wrong_receiver"] == 0)) {
			t.Errorf("replay run %d (replay %v): reported after %v (limit %v), %d false, %d replayed, rejected %v",
				r.Run, r.Replay, r.Detected, limit, r.False, r.Replayed, r.Rejected)
		}
	}
}
