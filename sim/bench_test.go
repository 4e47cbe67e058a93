package sim

import (
	"runtime"
	"testing"
	"time"
)

// The benchmarks measure the budget of issue 5: simulator throughput in
// events per second, the 256,000-node detector runs, the 4,096-node
// broadcast study (extrapolated to 10^5 runs per algorithm) and the memory
// per simulated node.
//
//	go test -run - -bench . -benchtime 1x ./sim/

// BenchmarkDetectorEvents runs the detector (LOWNOISE, maximal burst) at
// 16,000 nodes and reports events per second.
func BenchmarkDetectorEvents(b *testing.B) {
	benchDetector(b, 16000, Burst{Window: LowNoise.Delta / 10})
}

// BenchmarkDetector256kBurst is one run of the largest point of the stab
// sweep: 256,000 nodes, ⌊log2 n⌋ − 1 = 16 quasi-simultaneous failures.
func BenchmarkDetector256kBurst(b *testing.B) {
	benchDetector(b, 256000, Burst{Window: LowNoise.Delta / 10})
}

// BenchmarkDetector256kRandom is one run at 256,000 nodes with random
// failures, μ_ind = 1 year.
func BenchmarkDetector256kRandom(b *testing.B) {
	benchDetector(b, 256000, Exponential{MTBF: Year})
}

func benchDetector(b *testing.B, n int, plan FailurePlan) {
	cfg := DetectorConfig{N: n, H: LowNoise.H, Delta: LowNoise.Delta, Net: OnePort{T: LowNoise.T}, Failures: plan}
	var events uint64
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		d, err := NewDetector(cfg, RunSeed(1, i))
		if err != nil {
			b.Fatal(err)
		}
		events += d.Run().Events
	}
	sec := time.Since(start).Seconds()
	b.ReportMetric(float64(events)/sec, "events/s")
	b.ReportMetric(sec/float64(b.N), "s/run")
}

// BenchmarkDetectorMemory reports the heap held by a 256,000-node
// detector run after it built its nodes, per node.
func BenchmarkDetectorMemory(b *testing.B) {
	const n = 256000
	cfg := DetectorConfig{N: n, H: LowNoise.H, Delta: LowNoise.Delta, Net: OnePort{T: LowNoise.T}, Failures: Burst{Window: LowNoise.Delta / 10}}
	for b.Loop() {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		d, err := NewDetector(cfg, 1)
		if err != nil {
			b.Fatal(err)
		}
		d.Run()
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/n, "B/node")
		b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/(1<<20), "MiB")
		runtime.KeepAlive(d)
	}
}

// BenchmarkBcastStudy4096 runs each algorithm of the broadcast study at
// 4,096 nodes with the expected failures, 2,000 runs on all CPUs, and
// reports the time 10^5 runs take.
func BenchmarkBcastStudy4096(b *testing.B) {
	const runs = 2000
	sc := Scenarios(4096)[1]
	for _, alg := range BcastAlgs {
		b.Run(alg, func(b *testing.B) {
			for b.Loop() {
				start := time.Now()
				if _, err := BcastStudy(alg, 4096, sc, runs, runtime.GOMAXPROCS(0), 1, nil); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(time.Since(start).Seconds()*1e5/runs, "s/1e5runs")
			}
		})
	}
}

// BenchmarkProbe256k is one random-probing run at 256,000 processes.
func BenchmarkProbe256k(b *testing.B) {
	p := NewProber(256000)
	for i := 0; b.Loop(); i++ {
		p.Run(uint64(i))
	}
}
