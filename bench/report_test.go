package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportFromResults renders every output of a suite filled with known
// results and checks that the numbers reach the CSV files and the summary.
func TestReportFromResults(t *testing.T) {
	ms := time.Millisecond
	var hist Log2Hist
	hist.Add(3000)
	s := &Suite{Profile: Quick, Out: t.TempDir(), Command: "vigil bench quick", Started: time.Now(),
		Durations: map[string]time.Duration{"sweep": time.Second}, Errors: map[string]string{"imb-go": "boom"},
		IMBMPI: []Result{{Load: PingPong, Ranks: 2, Size: 1024, Reps: 10, RankTimes: RankTimes{TMin: 700, TMax: 775, TAvg: 740}}},
		Noise: []NoiseRow{{H: ms, NoiseResult: NoiseResult{Probe: Selfish, Noise: 0.01, Detours: hist, MaxDetour: 3 * time.Microsecond}},
			{H: ms, On: true, NoiseResult: NoiseResult{Probe: Selfish, Noise: 0.0123, Detours: hist, MaxDetour: 5 * time.Microsecond}}},
		SweepRuns: []SweepRun{
			{H: ms, Placement: InProcess, Results: []Result{res(PingPong, 1024, 10)}},
			{H: ms, Placement: InProcess, On: true, Results: []Result{res(PingPong, 1024, 13)}},
		},
		Accuracy: []AccuracyRow{{Load: Compute, RealTime: true, H: ms, Delta: 10 * ms, AgentReport: AgentReport{Missed: 4, FIFO: 4}}},
		Verdicts: []AccuracyVerdict{{Load: Compute, RealTime: true, SmallestSafe: ms, RealTimeGranted: true}},
		RTProcess: []GuardRow{
			{Option: OptionRTProcess, Load: Compute, H: ms, Delta: 10 * ms, Round: 0, On: true, AgentReport: AgentReport{Missed: 1, ProcessRT: 4}},
			{Option: OptionRTProcess, Load: Compute, H: ms, Delta: 10 * ms, Round: 0, On: false, AgentReport: AgentReport{Suspicions: 3, Evicted: 1, Missed: 2}},
		},
		Cost: []CostRun{
			{Transport: CostUDP, H: ms, Delta: 100 * ms, Check: 10 * ms, N: 2, Side: CostC, EmitterHow: "single thread", Background: 0.25,
				Samples: []CostSample{{Rank: 1, Window: 2 * time.Second, CPU: 40 * ms, Emitter: 40 * ms, CtxSwitches: 2000}}},
			{Transport: CostUDP, H: ms, Delta: 100 * ms, Check: 10 * ms, N: 2, Side: CostVigil, Heartbeat: CostUDP,
				Samples: []CostSample{{Rank: 0, Window: 2 * time.Second, CPU: 60 * ms, Emitter: 50 * ms, CtxSwitches: 3000}}},
		},
		Sched: []AttributionRow{{H: ms, Duration: time.Second, Attribution: Attribution{Source: "schedstat", Why: "no BPF here", DetectorCPU: 2e6}}},
		H2H: []H2HRow{
			{System: Vigil, N: 8, Period: 200 * ms, MsgsPerPeriod: 8,
				One: Kill{First: 1080 * ms, Stable: 1090 * ms, Complete: true, Latencies: []time.Duration{1080 * ms, 1090 * ms}}},
			{System: Memberlist, N: 8, Period: 200 * ms, MsgsPerPeriod: 16,
				One: Kill{First: 1500 * ms, Stable: 1600 * ms, Latencies: []time.Duration{1500 * ms}}},
		},
	}
	s.Overheads = Overheads(s.SweepRuns)
	files, err := s.WriteCSVs()
	if err != nil {
		t.Fatal(err)
	}
	plots, err := s.WritePlots()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"imb_mpi.csv", "noise.csv", "sweep_runs.csv", "sweep_overhead.csv", "accuracy.csv", "rtprocess.csv", "cost.csv", "sched.csv", "h2h.csv", "h2h_latency.csv"}
	if strings.Join(files, ",") != strings.Join(want, ",") {
		t.Errorf("CSV files %v, want %v", files, want)
	}
	if strings.Join(plots, ",") != "overhead_PingPong.png,detection_cdf.png,h2h.png" {
		t.Errorf("plots %v", plots)
	}
	for _, f := range append(files, plots...) {
		if st, err := os.Stat(filepath.Join(s.Out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(s.Out, "sweep_overhead.csv"))
	if !strings.Contains(string(b), "PingPong,1024,1000.000,in-process,10.000000,13.000000,0.300000,0.300000") {
		t.Errorf("sweep_overhead.csv:\n%s", b)
	}
	b, _ = os.ReadFile(filepath.Join(s.Out, "rtprocess.csv"))
	if !strings.Contains(string(b), "compute,1000.000,10000.000,0,false,3,1,0,2") {
		t.Errorf("rtprocess.csv:\n%s", b)
	}
	b, _ = os.ReadFile(filepath.Join(s.Out, "cost.csv"))
	if !strings.Contains(string(b), "udp,1000.000,2,100000.000,10000.000,C,0,1,,2000000.000,40000000,40000000,2000,20.000000,1.000000,0.020000,0,0,0,0,0.250000,0.000,single thread") {
		t.Errorf("cost.csv:\n%s", b)
	}
	md := s.Summary(files)
	for _, w := range []string{"| PingPong | 1024 | — | 0.775 |", "imb-go: `boom`", "| Selfish | 1ms | 1.00 ± 0.00 % | 1.23 ± 0.00 % | +0.23 % | 3µs / 5µs |", "+30.0 % * (med +30.0 %)", "| all loads and sizes | in-process | median of cells | med +30.0 % |", "| compute | SCHED_FIFO asked | 1ms |",
		"no BPF here", "| compute | 1ms | 1 + 1 | 0 | 1 | 0 / 3 |", "| vigil | 8 | 1.08s / 1.09s | — / — (incomplete) |", "1.5s / 1.6s (incomplete)", "vigil bench quick",
		"| 1ms | 2 | udp | vigil | udp | 30.0 | 25.0 / 5.0 | 1.50 (1.50–1.50) | 1.50 | 3.000 | 0 | 0 | 0.00 (0.00) |"} {
		if !strings.Contains(md, w) {
			t.Errorf("summary lacks %q:\n%s", w, md)
		}
	}
}
