package sim

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/hb"
	"github.com/vigil-hpc/vigil/ranks"
)

func TestHostCrashPlan(t *testing.T) {
	for _, c := range []struct {
		n    int
		plan HostCrash
		want int // crashed ranks
	}{
		{64, HostCrash{HostSize: 8, Hosts: 1}, 8},
		{64, HostCrash{HostSize: 8, Hosts: 3, Window: 20 * ms}, 24},
		{64, HostCrash{HostSize: 8, Hosts: 8}, 56}, // one host survives
		{70, HostCrash{HostSize: 16, Hosts: 4}, 0}, // checked below: the short host 4 may be drawn
		{64, HostCrash{}, 1},
	} {
		for seed := uint64(1); seed <= 20; seed++ {
			f, mtbf := c.plan.plan(c.n, newRand(seed, streamFailures))
			if mtbf != 0 {
				t.Fatalf("%v: mtbf %d", c.plan, mtbf)
			}
			size := max(c.plan.HostSize, 1)
			if c.want > 0 && len(f) != c.want {
				t.Fatalf("%v n=%d: %d failures, want %d", c.plan, c.n, len(f), c.want)
			}
			hosts := map[int]int64{} // host -> crash time
			seen := map[ranks.Rank]bool{}
			for i, x := range f {
				if i > 0 && x.At < f[i-1].At {
					t.Fatalf("%v: not sorted: %v", c.plan, f)
				}
				if x.At < 0 || x.At > c.plan.Window || int(x.Rank) >= c.n || seen[x.Rank] {
					t.Fatalf("%v: bad failure %+v in %v", c.plan, x, f)
				}
				seen[x.Rank] = true
				h := int(x.Rank) / size
				if at, ok := hosts[h]; ok && at != x.At {
					t.Fatalf("%v: host %d crashes at two times: %v", c.plan, h, f)
				}
				hosts[h] = x.At
			}
			if len(hosts) != min(max(c.plan.Hosts, 1), (c.n+size-1)/size-1) {
				t.Fatalf("%v n=%d: %d hosts crashed: %v", c.plan, c.n, len(hosts), f)
			}
			for h := range hosts { // whole hosts
				for x := h * size; x < min((h+1)*size, c.n); x++ {
					if !seen[ranks.Rank(x)] {
						t.Fatalf("%v: host %d crashed without rank %d: %v", c.plan, h, x, f)
					}
				}
			}
			if f[0].At != 0 {
				t.Fatalf("%v: first crash at %d", c.plan, f[0].At)
			}
		}
	}
	if s := (HostCrash{HostSize: 16, Hosts: 4}).String(); s != "hostcrash(4 hosts of 16 ranks at once)" {
		t.Errorf("String: %q", s)
	}
	if s := (HostCrash{HostSize: 64, Hosts: 1, Window: 100 * ms}).String(); s != "hostcrash(1 host of 64 ranks within 100ms)" {
		t.Errorf("String: %q", s)
	}
}

func TestDeadBlocks(t *testing.T) {
	for _, c := range []struct {
		n    int
		dead []ranks.Rank
		want []int
	}{
		{16, nil, nil},
		{16, []ranks.Rank{3}, []int{1}},
		{16, []ranks.Rank{3, 4, 5, 9}, []int{3, 1}},
		{16, []ranks.Rank{0, 1, 7, 14, 15}, []int{4, 1}},
		{4, []ranks.Rank{0, 1, 2, 3}, []int{4}},
	} {
		if got := DeadBlocks(c.n, c.dead); !slices.Equal(got, c.want) {
			t.Errorf("DeadBlocks(%d, %v) = %v, want %v", c.n, c.dead, got, c.want)
		}
	}
}

// hostPlans are block crashes for the probe-round tests at n = 64: one host
// within the window, one larger than it (several rounds), adjacent hosts
// merging, hosts crashing one after the other, an observer dying during
// the probe round, and spread failures (each probe answered at once).
var hostPlans = []FailurePlan{
	HostCrash{HostSize: 8, Hosts: 1},
	HostCrash{HostSize: 16, Hosts: 1},
	HostCrash{HostSize: 8, Hosts: 3},
	HostCrash{HostSize: 4, Hosts: 4, Window: 60 * ms},
	Script{{At: 0, Rank: 10}, {At: 0, Rank: 11}, {At: 0, Rank: 12}, {At: 0, Rank: 13}, {At: 0, Rank: 14}, {At: 20 * ms, Rank: 15}, {At: 70 * ms, Rank: 16}},
	Script{{At: 0, Rank: 40}, {At: 0, Rank: 41}, {At: 0, Rank: 42}, {At: 55 * ms, Rank: 43}, {At: 75 * ms, Rank: 39}},
	Burst{Count: 4, Window: 5 * ms},
}

// TestSkipEqualsFullProbe is TestSkipEqualsFull with block mending: a probe
// round's deadline comes before SUSP-TIMEOUT's, and the skipping mode must
// evaluate the observer then, exactly as the full mode's timer or checks
// do.
func TestSkipEqualsFullProbe(t *testing.T) {
	for _, check := range []int64{0, 3 * ms} {
		for _, probe := range []int{2, 8} {
			for pi, plan := range hostPlans {
				for seed := uint64(1); seed <= 3; seed++ {
					cfg := smallCfg(64, plan)
					cfg.Check, cfg.Probe = check, probe
					cfg.Heartbeats = HeartbeatsSkip
					rs, ts, _ := runTraced(t, cfg, seed)
					cfg.Heartbeats = HeartbeatsFull
					rf, tf, _ := runTraced(t, cfg, seed)
					if d := diffTraces(ts, tf); d != "" {
						t.Fatalf("check=%v W=%d plan %d (%v) seed %d: skip and full differ: %s", time.Duration(check), probe, pi, plan, seed, d)
					}
					rs.Heartbeats, rs.Events, rf.Heartbeats, rf.Events = 0, 0, 0, 0
					if !resultsEqual(rs, rf) {
						t.Fatalf("check=%v W=%d plan %v seed %d: results differ:\nskip %+v\nfull %+v", time.Duration(check), probe, plan, seed, rs, rf)
					}
					if rs.Stabilized < 0 || rs.FalseSuspicions != 0 || rs.ProbeMsgs == 0 {
						t.Fatalf("W=%d plan %v seed %d: %+v", probe, plan, seed, rs)
					}
				}
			}
		}
	}
}

func resultsEqual(a, b DetectorResult) bool { return reflect.DeepEqual(a, b) }

// TestHostCrashBlockBound: with block mending every survivor knows a dead
// host within hb.BlockBound of the crash (one round for a host within the
// window, more beyond it), no live rank is ever reported, every survivor
// ends with exactly the dead set; Algorithm 1 takes about 2δ per rank.
func TestHostCrashBlockBound(t *testing.T) {
	const n = 256
	for _, c := range []struct {
		size, hosts, probe int
	}{{16, 1, 16}, {16, 1, 4}, {64, 1, 16}, {16, 3, 16}, {8, 2, 8}, {16, 1, 0}} {
		for seed := uint64(1); seed <= 4; seed++ {
			cfg := smallCfg(n, HostCrash{HostSize: c.size, Hosts: c.hosts})
			cfg.Probe = c.probe
			r, _, d := runTraced(t, cfg, seed)
			if r.AllKnown < 0 || r.Stabilized < r.AllKnown || r.FalseSuspicions != 0 || r.Evicted != 0 || r.Failures != c.size*c.hosts {
				t.Fatalf("%+v seed %d: %+v", c, seed, r)
			}
			for i := range n {
				ring, alive := d.Ring(ranks.Rank(i))
				if alive && !ring.Dead().Equal(ranks.Of(r.Dead...)) {
					t.Fatalf("%+v seed %d: rank %d knows %v, dead %v", c, seed, i, ring.Dead(), r.Dead)
				}
			}
			b := slices.Max(DeadBlocks(n, r.Dead))
			if c.probe == 0 {
				// Algorithm 1 walks the block: about 2δ per rank.
				if r.AllKnown < int64(2*b-2)*cfg.Delta {
					t.Fatalf("%+v seed %d: Algorithm 1 knew a block of %d after %v", c, seed, b, time.Duration(r.AllKnown))
				}
				if r.ProbeMsgs != 0 {
					t.Fatalf("Algorithm 1 probed: %+v", r)
				}
				continue
			}
			if bound := hb.BlockBound(b, c.probe, n, cfg.Delta, ms); r.AllKnown > bound {
				t.Fatalf("%+v seed %d: block of %d known after %v > BlockBound %v", c, seed, b, time.Duration(r.AllKnown), time.Duration(bound))
			}
		}
	}
}

// TestHostCrashEarlyProbes: the same host crashes with early probes
// (ProbeAfter = δ/2): accurate, complete, within BlockBound, and sooner
// than with the probes at the suspicion.
func TestHostCrashEarlyProbes(t *testing.T) {
	const n = 256
	for seed := uint64(1); seed <= 4; seed++ {
		var known [2]int64
		for i := range known {
			cfg := smallCfg(n, HostCrash{HostSize: 16, Hosts: 1})
			cfg.Probe = 16
			after := int64(i) * cfg.Delta / 2 // 0, then δ/2
			cfg.ProbeAfter = after
			r, _, _ := runTraced(t, cfg, seed)
			if r.AllKnown < 0 || r.FalseSuspicions != 0 || r.Evicted != 0 || r.Failures != 16 {
				t.Fatalf("seed %d, ProbeAfter %d: %+v", seed, after, r)
			}
			if bound := hb.BlockBound(16, 16, n, cfg.Delta, ms); r.AllKnown > bound {
				t.Fatalf("seed %d: known after %v > BlockBound %v", seed, time.Duration(r.AllKnown), time.Duration(bound))
			}
			known[i] = r.AllKnown
		}
		if known[1] >= known[0] {
			t.Errorf("seed %d: early probes %v, at the suspicion %v: not sooner", seed, time.Duration(known[1]), time.Duration(known[0]))
		}
	}
}

// TestHostCrashStudy runs a small instance of the study.
func TestHostCrashStudy(t *testing.T) {
	sc := Scenario{Name: "small", H: 10 * ms, Delta: 50 * ms, T: ms}
	var rows []HostCrashStats
	for _, probe := range []int{0, 16} {
		st, err := HostCrashStudy(sc, 512, HostCrash{HostSize: 16, Hosts: 2}, probe, false, 3, 2, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.Incomplete != 0 || st.Unstable != 0 || st.FalseSuspicions != 0 || st.Failures != 32 || st.BlockMax < 16 {
			t.Fatalf("W=%d: %+v", probe, st)
		}
		rows = append(rows, st)
	}
	alg, blk := rows[0], rows[1]
	if blk.WithinBound != blk.Runs || blk.Bound <= 0 || blk.ProbeMsgs == 0 || alg.ProbeMsgs != 0 {
		t.Fatalf("block mending: %+v", blk)
	}
	if blk.AllKnownMax >= alg.AllKnownMin || alg.AllKnown < 10*blk.AllKnown {
		t.Fatalf("block mending %v s not well below Algorithm 1's %v s", blk.AllKnown, alg.AllKnown)
	}
	if alg.Block != blk.Block {
		t.Fatalf("the windows saw different crashes: %v vs %v", alg.Block, blk.Block)
	}
	if _, err := HostCrashStudy(sc, 512, HostCrash{HostSize: 16}, -1, false, 1, 1, 1, nil); err == nil {
		t.Fatal("negative Probe accepted")
	}
}

// TestHostCrashLabelled: with the placement given to the detectors
// (DetectorConfig.Hosts) a host of 64 with a window of 16 is known within
// one round's bound, hb.HostBlockBound (2δ + t + B(n)), where unlabelled
// it takes three rounds; several hosts at once stay within their bound;
// no live rank is reported and every survivor ends with the dead set.
func TestHostCrashLabelled(t *testing.T) {
	const n = 256
	for _, c := range []struct{ size, hosts, probe int }{{64, 1, 16}, {64, 1, 4}, {16, 3, 4}, {32, 2, 8}} {
		for seed := uint64(1); seed <= 4; seed++ {
			plan := HostCrash{HostSize: c.size, Hosts: c.hosts}
			cfg := smallCfg(n, plan)
			cfg.Probe, cfg.Hosts = c.probe, plan.Placement(n)
			r, _, d := runTraced(t, cfg, seed)
			if r.AllKnown < 0 || r.FalseSuspicions != 0 || r.Evicted != 0 || r.Failures != c.size*c.hosts {
				t.Fatalf("%+v seed %d: %+v", c, seed, r)
			}
			for i := range n {
				ring, alive := d.Ring(ranks.Rank(i))
				if alive && !ring.Dead().Equal(ranks.Of(r.Dead...)) {
					t.Fatalf("%+v seed %d: rank %d knows %v, dead %v", c, seed, i, ring.Dead(), r.Dead)
				}
			}
			b := slices.Max(DeadBlocks(n, r.Dead))
			bound := hb.HostBlockBound(b, b/c.size, c.probe, n, cfg.Delta, ms)
			if r.AllKnown > bound {
				t.Fatalf("%+v seed %d: block of %d known after %v > HostBlockBound %v", c, seed, b, time.Duration(r.AllKnown), time.Duration(bound))
			}
			if b == c.size && bound != hb.Bound(1, n, cfg.Delta, ms) {
				t.Fatalf("one host's bound %v is not T(1)", time.Duration(bound))
			}
			cfg.Hosts = nil
			if plain := mustRun(t, cfg, seed); b > c.probe && plain.AllKnown <= r.AllKnown {
				t.Fatalf("%+v seed %d: labelled %v not sooner than unlabelled %v", c, seed, time.Duration(r.AllKnown), time.Duration(plain.AllKnown))
			}
		}
	}
	st, err := HostCrashStudy(Scenario{Name: "small", H: 10 * ms, Delta: 50 * ms, T: ms}, 512, HostCrash{HostSize: 64, Hosts: 2}, 16, true, 2, 2, 1, nil)
	if err != nil || !st.Labelled || st.WithinBound != st.Runs || st.FalseSuspicions != 0 || st.Incomplete != 0 {
		t.Fatalf("labelled study: %+v %v", st, err)
	}
}

func mustRun(t *testing.T, cfg DetectorConfig, seed uint64) DetectorResult {
	t.Helper()
	d, err := NewDetector(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	return d.Run()
}
