package main

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/hostile"
	"github.com/vigil-hpc/vigil/lab/mpitest"
	"github.com/vigil-hpc/vigil/node"
)

// TestMultiHostHostile runs the heartbeat path's hostile checks (issue
// #30; vigil-bench hostile on loopback) across three simulated hosts
// (network namespaces on a bridge), `vigil agent` under mpirun, two ranks
// per host placed round-robin: every ring neighbour is on another host, so
// every heartbeat is a UDP datagram over the bridge. h = 20 ms, δ = 400 ms,
// block mending off (its probes would learn a death without heartbeats).
// From the root namespace, an attacker off the ranks' hosts:
//
//  1. floods rank 1's port (its host's address) for 3 s from one socket
//     (junk, other jobs' frames, this job's heartbeats with forged tags):
//     no rank is reported, and rank 1's metrics count the datagrams
//     refused and the kernel's drops; then for 3 s more from the forged
//     address of rank 0, the emitter rank 1 watches: no report, and 90 %
//     or more of the datagrams counted as dropped by the kernel (the
//     watched lane's filter);
//  2. captures rank 0's datagrams on its host's bridge port for 2 s, kills
//     ranks 0 and 1 at once, and replays the capture to rank 2 (rank 0's
//     next observer, on a third host) from rank 0's forged address and
//     port, at their pace: rank 2 refuses them (wrong_receiver) and
//     reports rank 0 no later than δ after rank 5 reports rank 3 in the
//     same kill without a replay (ranks 3 and 4, next), and before the
//     replay ends.
//
// No live rank may be reported at any point.
func TestMultiHostHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun across network namespaces")
	}
	mpitest.NeedHosts(t)
	const (
		nh, ppn  = 3, 2
		n        = nh * ppn
		h, delta = 20 * time.Millisecond, 400 * time.Millisecond
		capture  = 2 * time.Second
	)
	hosts := mpitest.NewHosts(t, nh)
	j := hosts.Start(t, n, ppn, nil, []string{"--map-by", "node"}, pmixVigil(t), "agent", "-h", h.String(), "-delta", delta.String(),
		"-partition", "continue", "-mend-probe", "0", "-metrics-addr", "0.0.0.0:0", "-log-level", "error")
	m := newMHJob(t, j)
	m.awaitReady(n)
	ready := node.Mono()
	pids, hostOf := hosts.WaitPIDs(n, 10*time.Second)
	addr := func(r uint32) netip.AddrPort {
		m.mu.Lock()
		defer m.mu.Unlock()
		ap, err := netip.ParseAddrPort(m.ready[r].Addr)
		if err != nil || ap.Addr() != hosts.Addr(hostOf[int(r)]) {
			t.Fatalf("rank %d on host %d published %q (%v)", r, hostOf[int(r)], m.ready[r].Addr, err)
		}
		return ap
	}
	metrics := func(r uint32) map[string]float64 {
		m.mu.Lock()
		ep := m.ready[r].Metrics
		m.mu.Unlock()
		_, port, err := net.SplitHostPort(ep)
		if err != nil {
			t.Fatalf("rank %d's metrics endpoint %q: %v", r, ep, err)
		}
		return scrape(t, net.JoinHostPort(hosts.Addr(hostOf[int(r)]).String(), port))
	}
	gone, survivors := map[uint32]bool{}, map[uint32]bool{}
	for r := range uint32(n) {
		survivors[r] = true
	}
	time.Sleep(time.Duration(ready+int64(2*time.Second+2*delta)-node.Mono()) + 300*time.Millisecond) // past the start grace

	// 1. The flood.
	job, err := jobID(pids[1])
	if err != nil {
		t.Fatal(err)
	}
	junk := hostile.Junk(job, n, 96)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	sent, took, err := hostile.Flood(ctx, addr(1), junk)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * delta)
	m.check("flood", gone, survivors, nil)
	mt := metrics(1)
	var refused float64
	for k, v := range mt {
		if strings.HasPrefix(k, "vigil_frames_rejected_total") {
			refused += v
		}
	}
	drops := mt["vigil_heartbeat_datagrams_kernel_dropped_total"]
	t.Logf("flood of rank 1's port on host %s: %d datagrams in %v (%.0f/s); no report; rank 1 refused %.0f, the kernel dropped %.0f",
		hosts.Name(hostOf[1]), sent, took.Round(time.Millisecond), float64(sent)/took.Seconds(), refused, drops)
	if refused == 0 {
		t.Errorf("rank 1 counted no refused datagram after the flood: %v", mt)
	}

	// The same junk from rank 0's forged address, the emitter rank 1
	// watches: its lane's filter drops it in the kernel.
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
	sent, took, err = hostile.SpoofFlood(ctx, addr(0), addr(1), junk, 0)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * delta)
	m.check("forged-source flood", gone, survivors, nil)
	drops2 := metrics(1)["vigil_heartbeat_datagrams_kernel_dropped_total"]
	t.Logf("flood of rank 1's port from rank 0's forged address: %d datagrams in %v (%.0f/s); no report; the kernel dropped %.0f more",
		sent, took.Round(time.Millisecond), float64(sent)/took.Seconds(), drops2-drops)
	if drops2-drops < 0.9*float64(sent) {
		t.Errorf("%.0f of %d forged datagrams counted as dropped", drops2-drops, sent)
	}

	// 2. The replay, and the same kill without one.
	src, to := addr(0), addr(2)
	capt, err := hostile.StartCapture(hosts.Port(hostOf[0]), src)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(capture)
	captured := capt.Stop()
	if len(captured) < int(capture/h)/2 {
		t.Fatalf("captured %d datagrams of rank 0 in %v", len(captured), capture)
	}
	kill := func(rs ...uint32) int64 {
		t0 := node.Mono()
		for _, r := range rs {
			if err := syscall.Kill(pids[int(r)], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			gone[r] = true
			delete(survivors, r)
		}
		return t0
	}
	sp, err := hostile.NewSpoofer(src, to)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	wrongBefore := metrics(2)[`vigil_frames_rejected_total{reason="wrong_receiver"}`]
	t0 := kill(1, 0)
	replayed := 0
	reported := func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		_, ok := m.dead[2][0]
		return ok
	}
	for _, b := range captured {
		if reported() {
			break
		}
		sp.Load([][]byte{b})
		if k, _ := sp.Send(); k == 1 {
			replayed++
		}
		time.Sleep(h)
	}
	m.await("ranks 0 and 1 killed, rank 0's heartbeats replayed", 30*time.Second, func() string { return m.missing(gone, survivors) })
	m.mu.Lock()
	withReplay := time.Duration(m.dead[2][0].DeliveredMono - t0)
	detector := m.dead[2][0].Detector
	m.mu.Unlock()
	wrong := metrics(2)[`vigil_frames_rejected_total{reason="wrong_receiver"}`] - wrongBefore

	t1 := kill(4, 3)
	m.await("ranks 3 and 4 killed", 30*time.Second, func() string { return m.missing(gone, survivors) })
	time.Sleep(2 * delta)
	m.check("the kills", gone, survivors, nil)
	m.mu.Lock()
	without := time.Duration(m.dead[5][3].DeliveredMono - t1)
	m.mu.Unlock()
	t.Logf("rank 0 reported by rank %d %v after its kill with %d of %d captured datagrams replayed to rank 2 (%.0f refused as wrong_receiver); "+
		"rank 3 reported by rank 5 %v after the same kill without a replay", detector, withReplay.Round(100*time.Microsecond),
		replayed, len(captured), wrong, without.Round(100*time.Microsecond))
	if wrong == 0 {
		t.Errorf("rank 2 refused none of the replayed datagrams as wrong_receiver")
	}
	if withReplay > without+delta || withReplay >= time.Duration(len(captured))*h {
		t.Errorf("with the replay rank 0 was reported after %v: want at most %v (without a replay, %v, + δ) and before the replay's end (%v)",
			withReplay, without+delta, without, time.Duration(len(captured))*h)
	}
}
