package bench

import (
	"testing"
	"time"
)

// TestProbes checks the probes' bookkeeping on short runs: a fraction in
// [0, 1], samples counted, a histogram that holds every recorded detour.
// It does not judge the machine's noise.
func TestProbes(t *testing.T) {
	for _, p := range Probes {
		r, err := RunProbe(p, ProbeOptions{Duration: 50 * time.Millisecond, CPU: 0})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if r.Noise < 0 || r.Noise > 1 || r.Elapsed < 50*time.Millisecond || !r.Pinned {
			t.Errorf("%s: %+v", p, r)
		}
		if p != Selfish && (r.Samples < 10 || r.Detours.Total() != uint64(r.Samples)) {
			t.Errorf("%s: %d samples, histogram holds %d", p, r.Samples, r.Detours.Total())
		}
		if p == Selfish && r.Detours.Total() != uint64(r.Samples) {
			t.Errorf("selfish: %d detours, histogram holds %d", r.Samples, r.Detours.Total())
		}
	}
	if _, err := RunProbe("nope", ProbeOptions{Duration: time.Millisecond, CPU: -1}); err == nil {
		t.Error("unknown probe accepted")
	}
	if _, err := RunProbe(FTQ, ProbeOptions{Duration: time.Millisecond, CPU: 4096}); err == nil {
		t.Error("pinning to a CPU that does not exist accepted")
	}
}
