package sim

import (
	"math"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/detector"
)

// TestBurstStudy runs a small row of the burst study (12 random ranks of
// 128 at once) and checks what it adds up: the killed ranks are all that is
// lost, every run finishes, and the message counts are means per run whose
// sum over the survivors is MsgsPerSurvivor. A study without runs is
// refused.
func TestBurstStudy(t *testing.T) {
	const n, runs = 128, 2
	h, delta := 10*time.Millisecond, 50*time.Millisecond
	cfg := DetectorConfig{N: n, H: int64(h), Delta: int64(delta), Net: OnePort{T: int64(time.Millisecond)},
		Failures: Burst{Count: 12}, Probe: 16, Horizon: int64(100 * delta), Partition: detector.PartitionContinue}
	st, err := BurstStudy(cfg, "random", 0.1, runs, 2, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Killed != 12 || st.Lost != 12 || st.FalseSuspicions != 0 || st.Incomplete != 0 || st.Unstable != 0 || st.Runs != runs {
		t.Fatalf("%+v", st)
	}
	msgs := st.BcastMsgs + st.NewObserverMsgs + st.ProbeMsgs + st.SyncMsgs + st.OtherMsgs
	if st.Detections < 1 || st.BcastMsgs == 0 || st.Events == 0 || math.Abs(msgs/float64(n-12)-st.MsgsPerSurvivor) > 1e-9*msgs {
		t.Fatalf("counts: %+v (%v messages a run, %v per survivor)", st.RunCounts, msgs, msgs/float64(n-12))
	}
	if _, err := BurstStudy(cfg, "random", 0.1, 0, 1, 1, nil); err == nil {
		t.Fatal("a study of 0 runs accepted")
	}
}
