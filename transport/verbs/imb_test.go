package verbs

import (
	"fmt"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/lab/imb"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// BenchmarkIMB runs the Go IMB loads of package lab/imb over this
// transport and, side by side in the same guest, over the TCP transport on
// loopback. One op is one IMB measurement of one size (warm-up, then
// IMB's repetitions); t_avg_us and t_max_us are IMB's t_avg and t_max
// across ranks, averaged over the ops. Compare verbs PingPong at 0 B with
// ib_send_lat in the same guest. verbsud is the verbs transport with
// every message over UD (no RC message links), for comparison.
func BenchmarkIMB(b *testing.B) {
	needDevice(b)
	groups := map[string]func() (*imb.Group, error){
		"verbs":   func() (*imb.Group, error) { return verbsGroup(b, 2) },
		"verbsud": func() (*imb.Group, error) { return verbsGroupWith(b, 2, true) },
		"tcp":     func() (*imb.Group, error) { return imb.NewTCPGroup(2) },
	}
	for _, kind := range []string{"verbs", "verbsud", "tcp"} {
		g, err := groups[kind]()
		if err != nil {
			b.Fatal(err)
		}
		for _, load := range []imb.Load{imb.PingPong, imb.Allreduce} {
			for _, size := range []int{0, 1 << 10, 4 << 10, 64 << 10} {
				b.Run(fmt.Sprintf("%s/%s/%dB", kind, load, size), func(b *testing.B) {
					var avg, mx time.Duration
					reps := 0
					for i := 0; i < b.N; i++ {
						res, err := g.Run(load, imb.RunOptions{Sizes: []int{size}, MaxReps: 200, TimeLimit: 30 * time.Millisecond})
						if err != nil {
							b.Fatal(err)
						}
						if len(res) != 1 || res[0].Reps == 0 {
							b.Fatalf("%d results, want 1 with repetitions", len(res))
						}
						avg += res[0].TAvg
						mx += res[0].TMax
						reps += res[0].Reps
					}
					b.ReportMetric(float64(avg.Nanoseconds())/1e3/float64(b.N), "t_avg_us")
					b.ReportMetric(float64(mx.Nanoseconds())/1e3/float64(b.N), "t_max_us")
					b.ReportMetric(float64(reps)/float64(b.N), "reps")
				})
			}
		}
		if err := g.Close(); err != nil {
			b.Errorf("closing the %s group: %v", kind, err)
		}
	}
}

// verbsGroup is an imb.Group of n ranks over verbs transports on the
// test device.
func verbsGroup(t testing.TB, n int) (*imb.Group, error) { return verbsGroupWith(t, n, false) }

// verbsGroupWith is verbsGroup, with every message over UD if udOnly.
func verbsGroupWith(t testing.TB, n int, udOnly bool) (*imb.Group, error) {
	handlers := make([]transport.Handler, n)
	open := func(r int, h transport.Handler) (transport.Transport, error) {
		handlers[r] = h
		cfg := testConfig(ranks.Rank(r), n, 77, logger(t))
		cfg.udOnly = udOnly
		tr, err := Open(cfg)
		if err != nil {
			return nil, err
		}
		return tr, nil
	}
	connect := func(trs []transport.Transport) error {
		addrs := make([]string, len(trs))
		for i, tr := range trs {
			addrs[i] = tr.(*Transport).Addr()
		}
		for i, tr := range trs {
			if err := tr.(*Transport).Start(addrs, handlers[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return imb.NewGroup(n, open, connect)
}

// TestIMBOverVerbs runs every Go IMB load at every IMB size from 0 B to
// 256 KiB over verbs, briefly, and checks IMB's reduction across ranks:
// the table is logged. (1 MiB, the transport's message limit, works too but
// takes 0.3–1.7 s per load under emulation; above it the transport refuses
// the message with transport.ErrTooLarge: Vigil's messages are tens of
// bytes.)
func TestIMBOverVerbs(t *testing.T) {
	needDevice(t)
	g, err := verbsGroup(t, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	sizes := imb.IMBSizes(256 << 10)
	for _, load := range imb.Loads {
		res, err := g.Run(load, imb.RunOptions{Sizes: sizes, MaxReps: 20, TimeLimit: 10 * time.Millisecond})
		if err != nil {
			t.Fatalf("%s: %v", load, err)
		}
		want := len(sizes)
		if !load.Sized() {
			want = 1
		}
		if len(res) != want {
			t.Fatalf("%s: %d results, want %d", load, len(res), want)
		}
		for _, r := range res {
			if r.Reps < 1 || r.TMin <= 0 || r.TMin > r.TAvg || r.TAvg > r.TMax {
				t.Fatalf("%s %d B: %d reps, t_min %v t_avg %v t_max %v", load, r.Size, r.Reps, r.TMin, r.TAvg, r.TMax)
			}
			t.Logf("%-9s %8d B  reps %4d  t_min %9.1f µs  t_avg %9.1f µs  t_max %9.1f µs", load, r.Size, r.Reps,
				float64(r.TMin.Nanoseconds())/1e3, float64(r.TAvg.Nanoseconds())/1e3, float64(r.TMax.Nanoseconds())/1e3)
		}
	}
	big := make([]byte, 2<<20)
	if err := g.Comm(0).Send(1, big); err == nil {
		t.Fatal("a 2 MiB message was accepted: the transport's limit is 1 MiB")
	}
}
