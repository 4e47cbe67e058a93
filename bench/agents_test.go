package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// buildVigil builds cmd/vigil into a temporary directory.
func buildVigil(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	bin := filepath.Join(t.TempDir(), "vigil")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/vigil")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building vigil: %v\n%s", err, out)
	}
	return bin
}

// buildBench builds this module's vigil-bench command into a temporary
// directory.
func buildBench(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "vigil-bench")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/vigil-bench") // tests run in bench/
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building vigil-bench: %v\n%s", err, out)
	}
	return bin
}

// TestAgentsAttributionAccuracy drives real agents: a scheduler
// attribution window beside CPU burners, and one accuracy step at a
// comfortable h. It checks the harness (reports filled in, the emitter
// found, the agents' statistics collected), not the machine's speed.
func TestAgentsAttributionAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds vigil and starts agents")
	}
	bin := buildVigil(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	row, err := Attribute(ctx, bin, 2, 20*time.Millisecond, true, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("attribution: %+v", row)
	if row.EmitterHow == "" || row.AppCPU == 0 || row.DetectorCPU == 0 || row.EmitterSlices == 0 {
		t.Errorf("attribution incomplete: %+v", row)
	}
	if row.Source == "schedstat" && row.Why == "" {
		t.Error("schedstat fallback without a reason")
	}
	rows, verdicts, err := Accuracy(ctx, AccuracyConfig{VigilBin: bin, Ranks: 2, Hs: []time.Duration{50 * time.Millisecond},
		Duration: 300 * time.Millisecond, Loads: []string{Compute}, RealTime: []bool{true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || len(verdicts) != 1 || rows[0].Delta != 500*time.Millisecond {
		t.Fatalf("rows %+v verdicts %+v", rows, verdicts)
	}
	if v := verdicts[0]; (v.SmallestSafe == 0) == rows[0].Safe() {
		t.Errorf("verdict %+v does not follow row %+v", v, rows[0])
	}
	if _, _, err := Accuracy(ctx, AccuracyConfig{Loads: []string{"Nope"}, RealTime: []bool{false}, Hs: []time.Duration{time.Second}}); err == nil {
		t.Error("unknown load accepted")
	}
}
