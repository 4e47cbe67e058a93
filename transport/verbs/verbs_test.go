package verbs

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
	ibv "github.com/vigil-hpc/vigil/verbs"
)

// These tests need a real RDMA device: lab/rxe/run.sh runs them on soft-RoCE in
// a qemu guest (VIGIL_RXE_GUEST=1 there: a missing device is a failure).

var testKey = []byte("0123456789abcdef-verbs-transport")

func needDevice(t testing.TB) {
	t.Helper()
	err := devicesErr()
	if errors.Is(err, ibv.ErrNoDevice) {
		if os.Getenv("VIGIL_RXE_GUEST") == "1" {
			t.Fatalf("no RDMA device inside the rxe guest: %v", err)
		}
		t.Skip("no RDMA device: run make rxe-test")
	}
	if err != nil {
		t.Fatal(err)
	}
}

// devicesErr is ibv.Devices' error, looked up once per test binary: the
// lookup reads every GID table entry in sysfs, about a second in the
// emulated guest.
var devicesErr = sync.OnceValue(func() error {
	_, err := ibv.Devices()
	return err
})

func logger(t testing.TB) *slog.Logger {
	if os.Getenv("VIGIL_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return nil
}

// received records what one rank's handler got.
type received struct {
	mu   sync.Mutex
	msgs map[ranks.Rank][]string
	ch   chan struct{}
}

func (r *received) handler(from ranks.Rank, p []byte) {
	r.mu.Lock()
	r.msgs[from] = append(r.msgs[from], string(p))
	r.mu.Unlock()
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

// get returns a copy of what rank from sent.
func (r *received) get(from ranks.Rank) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs[from])
}

// testConfig is rank self of an n-rank job on the test device (the rxe
// guest's VIGIL_RXE_DEV and VIGIL_RXE_NETDEV), with the test key.
func testConfig(self ranks.Rank, n int, job uint64, log *slog.Logger) Config {
	return Config{Self: self, N: n, JobID: job, Key: testKey,
		Device: os.Getenv("VIGIL_RXE_DEV"), Netdev: os.Getenv("VIGIL_RXE_NETDEV"), Logger: log}
}

// openAll opens n transports (not started); Close is checked at cleanup.
func openAll(t testing.TB, n int, job uint64) []*Transport {
	t.Helper()
	needDevice(t)
	ts := make([]*Transport, n)
	for i := range ts {
		tr, err := Open(testConfig(ranks.Rank(i), n, job, logger(t)))
		if err != nil {
			t.Fatalf("Open rank %d: %v", i, err)
		}
		ts[i] = tr
		t.Cleanup(func() {
			if err := tr.Close(); err != nil {
				t.Errorf("rank %d Close: %v", i, err)
			}
		})
	}
	return ts
}

func addrsOf(ts []*Transport) []string {
	a := make([]string, len(ts))
	for i, tr := range ts {
		a[i] = tr.Addr()
	}
	return a
}

// cluster opens and starts n transports that record their messages.
func cluster(t testing.TB, n int) ([]*Transport, []*received) {
	t.Helper()
	ts := openAll(t, n, 42)
	recs := make([]*received, n)
	addrs := addrsOf(ts)
	for i, tr := range ts {
		recs[i] = &received{msgs: map[ranks.Rank][]string{}, ch: make(chan struct{}, 1)}
		if err := tr.Start(addrs, recs[i].handler); err != nil {
			t.Fatalf("Start rank %d: %v", i, err)
		}
	}
	return ts, recs
}

// waitFor polls cond every 2 ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// All-to-all messages, small and fragmented, arrive exactly once and in
// order per sender.
func TestMessagesAllToAll(t *testing.T) {
	const n = 8
	ts, recs := cluster(t, n)
	big := bytes.Repeat([]byte("0123456789"), 400) // 4,000 bytes: several datagrams
	for from := range ts {
		for to := range ts {
			for k := 0; k < 3; k++ {
				m := fmt.Sprintf("%d->%d #%d", from, to, k)
				if k == 1 {
					m += string(big)
				}
				if err := ts[from].Send(ranks.Rank(to), []byte(m)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for to := range recs {
		waitFor(t, 20*time.Second, fmt.Sprintf("rank %d received everything", to), func() bool {
			recs[to].mu.Lock()
			defer recs[to].mu.Unlock()
			total := 0
			for _, l := range recs[to].msgs {
				total += len(l)
			}
			return total >= 3*n
		})
		recs[to].mu.Lock()
		for from := range ts {
			got := recs[to].msgs[ranks.Rank(from)]
			want := []string{fmt.Sprintf("%d->%d #0", from, to), fmt.Sprintf("%d->%d #1", from, to) + string(big), fmt.Sprintf("%d->%d #2", from, to)}
			if !slices.Equal(got, want) {
				t.Errorf("rank %d from %d: got %d messages (first %.20q), want 3 in order", to, from, len(got), got)
			}
		}
		recs[to].mu.Unlock()
	}
	for i, tr := range ts {
		st := tr.Stats()
		if st.MsgsSent != 3*n || st.MsgsRecv != 3*n || st.MsgsDropped != 0 {
			t.Errorf("rank %d stats %+v", i, st)
		}
	}
}

// The first heartbeats to a new observer go over UD while the RC link is
// set up; then they are RDMA writes into the observer's registered slot
// array, which the observer reads with a load.
func TestHeartbeatOverRDMA(t *testing.T) {
	ts, _ := cluster(t, 2)
	e, o := ts[0], ts[1]
	seq := uint64(0)
	waitFor(t, 10*time.Second, "RDMA heartbeat link up", func() bool {
		seq++
		if err := e.SendHeartbeat(1, seq); err != nil {
			t.Fatalf("SendHeartbeat: %v", err)
		}
		return e.VerbsStats().RCWrites > 0
	})
	vs := e.VerbsStats()
	if vs.UDHeartbeats == 0 || vs.LinksUp != 1 {
		t.Fatalf("want UD heartbeats before the link and one link: %+v", vs)
	}
	for i := 0; i < 100; i++ {
		seq++
		if err := e.SendHeartbeat(1, seq); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "observer's slot shows the last sequence", func() bool { return o.Slots().Load(0) == seq })
	if got := e.VerbsStats().RCWrites; got < 100 {
		t.Fatalf("RCWrites = %d, want ≥ 100", got)
	}
	// The observer's UD poller may still be behind the RDMA writes (a
	// datagram it reads after a later write is an old heartbeat).
	waitFor(t, 5*time.Second, fmt.Sprintf("observer to count the %d UD heartbeats", vs.UDHeartbeats),
		func() bool { st := o.Stats(); return st.HeartbeatsRecv+st.Rejected["old_heartbeat"] == vs.UDHeartbeats })
	allocs := testing.AllocsPerRun(200, func() {
		seq++
		e.SendHeartbeat(1, seq)
	})
	if allocs != 0 {
		t.Errorf("SendHeartbeat over RDMA allocates %.1f times", allocs)
	}
	r := e.Resources()
	if r.QPs != 2 || r.AHs != 1 {
		t.Errorf("emitter resources %+v: want 2 QPs (UD + RC link), 1 AH", r)
	}
	if r := o.Resources(); r.QPs != 2 {
		t.Errorf("observer resources %+v: want 2 QPs (UD + passive RC)", r)
	}
	// Retargeting to another observer retires the old link.
	if err := e.SendHeartbeat(0, seq); err != nil { // rank 0 observing itself: any rank works
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "second link up", func() bool { return e.VerbsStats().LinksUp == 2 })
	seq++ // the emitter thread frees the replaced link at its next heartbeat
	if err := e.SendHeartbeat(0, seq); err != nil {
		t.Fatal(err)
	}
	if r := e.Resources(); r.QPs != 3 { // UD, the new active link, the passive end of it (self)
		t.Errorf("after retargeting: %+v, want 3 QPs", r)
	}
}

// When the observer's process is gone the RC write fails: the emitter
// counts it, goes back to UD and tries to reconnect, without an error
// reaching the caller on the fast path beyond the failed heartbeat itself.
func TestRCWriteErrorIsEvidenceOnly(t *testing.T) {
	ts, _ := cluster(t, 2)
	e, o := ts[0], ts[1]
	seq := linkUp(t, e, 1)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the RC write error seen", func() bool {
		seq++
		e.SendHeartbeat(1, seq)
		time.Sleep(time.Millisecond)
		return e.VerbsStats().RCErrors > 0
	})
	before := e.VerbsStats().UDHeartbeats
	for i := 0; i < 5; i++ {
		seq++
		e.SendHeartbeat(1, seq)
	}
	if e.VerbsStats().UDHeartbeats < before+5 {
		t.Fatalf("after the RC error heartbeats did not fall back to UD: %+v", e.VerbsStats())
	}
}

// Frames of another job, and frames claiming a rank from another QP, are
// rejected and counted.
func TestRejectsForeignAndSpoofed(t *testing.T) {
	ts, recs := cluster(t, 2)
	other := openAll(t, 2, 43)
	// other[1] believes it is rank 1 of a job whose rank 0 is ts[0].
	if err := other[1].Start([]string{ts[0].Addr(), other[1].Addr()}, func(ranks.Rank, []byte) {}); err != nil {
		t.Fatal(err)
	}
	other[1].Send(0, []byte("foreign"))
	waitFor(t, 5*time.Second, "foreign frame rejected", func() bool { return ts[0].Stats().Rejected["foreign_job"] > 0 })
	// same job and key, but not rank 1's QP: spoofing rank 1.
	spoof := openAll(t, 2, 42)
	if err := spoof[1].Start([]string{ts[0].Addr(), spoof[1].Addr()}, func(ranks.Rank, []byte) {}); err != nil {
		t.Fatal(err)
	}
	spoof[1].Send(0, []byte("spoofed"))
	waitFor(t, 5*time.Second, "spoofed frame rejected", func() bool { return ts[0].Stats().Rejected["wrong_source_qp"] > 0 })
	recs[0].mu.Lock()
	defer recs[0].mu.Unlock()
	if len(recs[0].msgs) != 0 {
		t.Fatalf("rank 0 delivered %v", recs[0].msgs)
	}
}

func TestStartErrors(t *testing.T) {
	ts := openAll(t, 2, 7)
	h := func(ranks.Rank, []byte) {}
	for _, c := range []struct {
		addrs []string
		want  string
	}{
		{[]string{ts[0].Addr()}, "1 addresses for 2 ranks"},
		{[]string{ts[0].Addr(), "127.0.0.1:80"}, "rank 1"},
		{[]string{ts[1].Addr(), ts[1].Addr()}, "published"},
	} {
		err := ts[0].Start(c.addrs, h)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
			t.Errorf("Start(%v) = %v, want an error containing %q", c.addrs, err, c.want)
		}
	}
	if err := ts[0].Send(5, nil); !errors.Is(err, transport.ErrUnknownRank) {
		t.Errorf("Send to rank 5: %v", err)
	}
}

// A detector of 8 nodes over verbs in one process: one node stops (its
// transport closes like a killed process's), every survivor reports it
// and nothing else.
func TestDetectorOverVerbs(t *testing.T) {
	const n, victim = 8, 3
	ts := openAll(t, n, 99)
	nodes := startNodes(t, ts)
	time.Sleep(5 * time.Second) // past the grace: heartbeats flow over RDMA
	links := uint64(0)
	for _, tr := range ts {
		links += tr.VerbsStats().RCWrites
	}
	if links == 0 {
		t.Fatal("no heartbeat went over RDMA")
	}
	for i, nd := range nodes {
		if d := nd.Dead(); len(d) != 0 {
			t.Fatalf("before the failure rank %d reports %v dead (false suspicion)", i, d)
		}
	}
	nodes[victim].Close()
	nodes[victim] = nil
	for i, nd := range nodes {
		if nd == nil {
			continue
		}
		waitFor(t, 15*time.Second, fmt.Sprintf("rank %d reports rank %d", i, victim), func() bool {
			_, ok := nd.Known(victim)
			return ok
		})
	}
	for i, nd := range nodes {
		if nd == nil {
			continue
		}
		if d := nd.Dead(); !slices.Equal(d, []ranks.Rank{victim}) {
			t.Errorf("rank %d reports %v, want [%d]", i, d, victim)
		}
	}
}

// startNodes starts a node over each transport of ts (h = 20 ms, δ = 1 s,
// 3 s of start-up grace), closed at cleanup.
func startNodes(t *testing.T, ts []*Transport) []*node.Node {
	t.Helper()
	return startNodesWith(t, ts, node.Config{HeartbeatPeriod: 20 * time.Millisecond,
		SuspectTimeout: time.Second, StartGrace: 3 * time.Second})
}

// startNodesWith starts a node with base's settings over each transport of
// ts, closed at cleanup (Close may come earlier).
func startNodesWith(t testing.TB, ts []*Transport, base node.Config) []*node.Node {
	t.Helper()
	addrs := addrsOf(ts)
	nodes := make([]*node.Node, len(ts))
	for i, tr := range ts {
		cfg := base
		cfg.Rank, cfg.Size, cfg.Slots = ranks.Rank(i), len(ts), tr.Slots()
		nd, err := node.Start(cfg, func(_ *transport.Slots, h transport.Handler) (transport.Transport, error) {
			return tr, tr.Start(addrs, h)
		})
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		nodes[i] = nd
		t.Cleanup(func() { nd.Close() })
	}
	return nodes
}

// Resource cost at N = 64: every rank messages its ring neighbour and
// heartbeats it over RDMA; then each holds the UD QP, one active and one
// passive RC QP, and address handles only for the ranks it talked to.
func TestCostN64(t *testing.T) {
	const n = 64
	ts, recs := cluster(t, n)
	for i, tr := range ts {
		if err := tr.Send(ranks.Rank((i+1)%n), []byte("hello neighbour")); err != nil {
			t.Fatal(err)
		}
	}
	seq := uint64(0)
	waitFor(t, 60*time.Second, "every ring link up", func() bool {
		seq++
		up := 0
		for i, tr := range ts {
			tr.SendHeartbeat(ranks.Rank((i+1)%n), seq)
			if tr.VerbsStats().RCWrites > 0 {
				up++
			}
		}
		return up == n
	})
	for i := range recs {
		waitFor(t, 10*time.Second, "message", func() bool {
			recs[i].mu.Lock()
			defer recs[i].mu.Unlock()
			return len(recs[i].msgs[ranks.Rank((i+n-1)%n)]) == 1
		})
	}
	var maxR Resources
	for _, tr := range ts {
		r := tr.Resources()
		maxR.QPs, maxR.AHs = max(maxR.QPs, r.QPs), max(maxR.AHs, r.AHs)
		maxR.Objects, maxR.RegisteredBytes = max(maxR.Objects, r.Objects), max(maxR.RegisteredBytes, r.RegisteredBytes)
	}
	t.Logf("COST N=%d per node (max over ranks): QPs=%d AHs=%d verbs_objects=%d registered_bytes=%d mtu=%d",
		n, maxR.QPs, maxR.AHs, maxR.Objects, maxR.RegisteredBytes, ts[0].mtu)
	if maxR.QPs != 3 || maxR.AHs > 2 {
		t.Errorf("per-node resources %+v: want 3 QPs and ≤ 2 AHs", maxR)
	}
}

// BenchmarkHeartbeatRDMA is the emitter thread's cost of one heartbeat
// through the transport (RDMA write, amortised completion handling):
// compare with verbs.BenchmarkRDMAWriteHeartbeat and lab/rxe/hbwrite.c.
func BenchmarkHeartbeatRDMA(b *testing.B) {
	ts, _ := cluster(b, 2)
	seq := linkUp(b, ts[0], 1)
	b.ReportAllocs()
	b.ResetTimer()
	dropped := 0
	for i := 0; i < b.N; i++ {
		seq++
		switch err := ts[0].SendHeartbeat(1, seq); {
		case errors.Is(err, errEngineFull):
			dropped++ // a full engine drops the heartbeat, as a full socket buffer does (counted)
		case err != nil:
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(dropped)/float64(b.N), "dropped/op")
}

// BenchmarkHeartbeatVsC settles the CPU-per-heartbeat ratio on a shared,
// noisy host by measuring both sides side by side: round after round on
// the same RC link, hbRound heartbeats through SendHeartbeat (the Go
// path: link lookup, lock, one cgo call per write) and as many writes by
// the C loop (ibv.Writer.WriteN, one cgo call for all), alternating which
// goes first; and, when VIGIL_HBWRITE names the stand-alone C program
// lab/rxe/hbwrite, a short run of it after each round. It reports the median
// of the per-round ratios (a burst of other work hits one round, not the
// median) and the median ns per heartbeat of each side.
func BenchmarkHeartbeatVsC(b *testing.B) {
	runtime.LockOSThread() // as the node's pinned emitter thread; both sides run here
	defer runtime.UnlockOSThread()
	ts, _ := cluster(b, 2)
	seq := linkUp(b, ts[0], 1)
	l := ts[0].links[1].Load()
	if l == nil {
		b.Fatal("no link after linkUp")
	}
	hbwrite := os.Getenv("VIGIL_HBWRITE")
	var goNs, cNs, procNs, inC, inProc []float64
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := min(hbRound, b.N-done)
		goFirst := len(goNs)%2 == 0
		var g, c time.Duration
		for _, side := range []bool{goFirst, !goFirst} {
			t0 := time.Now()
			if side {
				for i := 0; i < k; i++ {
					seq++
					if err := ts[0].SendHeartbeat(1, seq); err != nil {
						b.Fatal(err)
					}
				}
				g = time.Since(t0)
				continue
			}
			err := l.w.WriteN(l.remote, seq+1, uint64(k))
			c = time.Since(t0)
			seq += uint64(k)
			if err != nil {
				b.Fatal(err)
			}
		}
		done += k
		gn, cn := float64(g.Nanoseconds())/float64(k), float64(c.Nanoseconds())/float64(k)
		goNs, cNs, inC = append(goNs, gn), append(cNs, cn), append(inC, gn/cn)
		if hbwrite != "" {
			b.StopTimer()
			pn, err := runHBWrite(hbwrite)
			if err != nil {
				b.Fatal(err)
			}
			procNs, inProc = append(procNs, pn), append(inProc, gn/pn)
			b.StartTimer()
		}
	}
	b.StopTimer()
	if ts[0].VerbsStats().RCErrors != 0 {
		b.Fatal("RC write errors during the benchmark")
	}
	b.ReportMetric(median(goNs), "go_ns_hb")
	b.ReportMetric(median(cNs), "c_ns_hb")
	b.ReportMetric(median(inC), "go_over_c")
	b.ReportMetric(float64(len(inC)), "rounds")
	// Heartbeats the stall check also sent over UD (hbLink.stalled): 0
	// unless completions stopped for stallAfter, which would skew both sides.
	b.ReportMetric(float64(ts[0].VerbsStats().LateUD), "late_ud")
	if len(inProc) > 0 {
		b.ReportMetric(median(procNs), "hbwrite_ns_hb")
		b.ReportMetric(median(inProc), "go_over_hbwrite")
	}
}

// hbRound is the number of heartbeats per side and round of
// BenchmarkHeartbeatVsC: tens of ms of work per side under emulation.
const hbRound = 2048

// runHBWrite runs lab/rxe/hbwrite once for 0.1 s on the first device and
// returns its ns per heartbeat.
func runHBWrite(path string) (float64, error) {
	out, err := exec.Command(path, "", "0.1", "1").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s: %v: %s", path, err, out)
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "ns_op="); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("%s printed no ns_op: %s", path, out)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func linkUp(b testing.TB, e *Transport, to ranks.Rank) uint64 {
	seq := uint64(0)
	waitFor(b, 10*time.Second, "link up", func() bool {
		seq++
		e.SendHeartbeat(to, seq)
		return e.VerbsStats().RCWrites > 0
	})
	return seq
}

// BenchmarkHeartbeatWriteLatency is half the round trip of a heartbeat
// write ping-pong (A writes B's slot, B sees it and writes A's): the
// one-way latency from SendHeartbeat to the observer's load seeing it.
// Compare with ib_write_lat in the same guest.
func BenchmarkHeartbeatWriteLatency(b *testing.B) {
	ts, _ := cluster(b, 2)
	s0, s1 := linkUp(b, ts[0], 1), linkUp(b, ts[1], 0)
	seq := max(s0, s1) + 1
	done := make(chan error, 1)
	n := b.N
	start := seq
	go func() { // B: echo
		for i := 0; i < n; i++ {
			want := start + uint64(i)
			deadline := time.Now().Add(10 * time.Second)
			for ts[1].Slots().Load(0) < want {
				if time.Now().After(deadline) {
					done <- fmt.Errorf("B: no heartbeat %d", want)
					return
				}
			}
			ts[1].SendHeartbeat(0, want)
		}
		done <- nil
	}()
	rtt := make([]time.Duration, n)
	b.ResetTimer()
	for i := 0; i < n; i++ {
		want := start + uint64(i)
		t0 := time.Now()
		ts[0].SendHeartbeat(1, want)
		deadline := t0.Add(10 * time.Second)
		for ts[0].Slots().Load(1) < want {
			if time.Now().After(deadline) {
				b.Fatalf("A: no echo of %d", want)
			}
		}
		rtt[i] = time.Since(t0)
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	reportOneWay(b, rtt)
}

// reportOneWay reports half the median round trip (what perftest's
// t_typical is) and half the mean.
func reportOneWay(b *testing.B, rtt []time.Duration) {
	var sum time.Duration
	for _, d := range rtt {
		sum += d
	}
	slices.Sort(rtt)
	b.ReportMetric(float64(rtt[len(rtt)/2].Nanoseconds())/2, "ns_oneway_p50")
	b.ReportMetric(float64(sum.Nanoseconds())/float64(2*len(rtt)), "ns_oneway_avg")
}

// BenchmarkMessageLatency is half the round trip of a message ping-pong
// over the reliable UD channel (Send → Handler). Compare with ib_send_lat.
func BenchmarkMessageLatency(b *testing.B) {
	needDevice(b)
	ts := openAll(b, 2, 5)
	addrs := addrsOf(ts)
	pong := make(chan struct{}, 1)
	if err := ts[0].Start(addrs, func(ranks.Rank, []byte) { pong <- struct{}{} }); err != nil {
		b.Fatal(err)
	}
	if err := ts[1].Start(addrs, func(from ranks.Rank, p []byte) { ts[1].Send(from, p) }); err != nil {
		b.Fatal(err)
	}
	msg := make([]byte, 32)
	rtt := make([]time.Duration, b.N)
	timeout := time.NewTimer(time.Hour)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		ts[0].Send(1, msg)
		timeout.Reset(10 * time.Second)
		select {
		case <-pong:
		case <-timeout.C:
			b.Fatal("no pong")
		}
		rtt[i] = time.Since(t0)
	}
	b.StopTimer()
	reportOneWay(b, rtt)
}

// BenchmarkObserverCheck is the observer's check: one atomic load of its
// emitter's word in the registered slot array.
func BenchmarkObserverCheck(b *testing.B) {
	ts := openAll(b, 2, 6)
	s := ts[0].Slots()
	b.ReportAllocs()
	b.ResetTimer()
	var sum uint64
	for i := 0; i < b.N; i++ {
		sum += s.Load(1)
	}
	if sum != 0 {
		b.Fatal("nobody wrote: the word must be 0")
	}
}
