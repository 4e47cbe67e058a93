package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/launch"
)

func TestParseMPIOutput(t *testing.T) {
	out := "noise\nimb,PingPong,2,1024,1000,0.775,0.780,0.777\nimb,Barrier,4,0,1000,3.3,3.5,3.4\nvigil,1000000,10000000,2\n"
	o, err := ParseMPIOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Results) != 2 || o.VigilEvents != 2 {
		t.Fatalf("%+v", o)
	}
	r := o.Results[0]
	if r.Load != PingPong || r.Ranks != 2 || r.Size != 1024 || r.Reps != 1000 || r.TMin != 775*time.Nanosecond || r.TMax != 780*time.Nanosecond {
		t.Errorf("%+v", r)
	}
	if o, _ := ParseMPIOutput("imb,Barrier,2,0,1,1,1,1\n"); o.VigilEvents != -1 {
		t.Error("no vigil line must give −1 events")
	}
	for _, bad := range []string{"", "imb,Nope,2,0,1,1,1,1", "imb,Barrier,2,0,1,1,1", "imb,Barrier,x,0,1,1,1,1", "imb,Barrier,2,0,1,1,-1,1",
		"imb,Barrier,2,0,1,1,1,1\nvigil,1,1,x"} {
		if _, err := ParseMPIOutput(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestMpirunArgs(t *testing.T) {
	a := MPIRun{Bin: "/x/imb", Ranks: 2, Loads: []Load{PingPong, Bcast}, Sizes: []int{0, 8}, MaxReps: 10,
		TimeLimit: 250 * time.Millisecond, Env: []string{"VIGIL_H=1ms"}}.mpirunArgs()
	i := slices.Index(a, "/x/imb")
	if i < 0 || !slices.Equal(a[i:], []string{"/x/imb", "-b", "PingPong,Bcast", "-sizes", "0,8", "-reps", "10", "-time", "0.25"}) {
		t.Errorf("args %v", a)
	}
	if j := slices.Index(a, "-x"); j < 0 || a[j+1] != "VIGIL_H=1ms" || j > i {
		t.Errorf("env not passed before the program: %v", a)
	}
}

func TestSummarizeAgentLines(t *testing.T) {
	r := summarizeAgentLines([]launch.Line{
		{Ev: "dead", Rank: 0, Dead: 3}, {Ev: "dead", Rank: 1, Dead: 3}, {Ev: "dead", Rank: 1, Dead: 2, Left: true},
		{Ev: "stats", Missed: 2, MaxLateNs: 5e6, RealTime: true, Held: 4}, {Ev: "stats", Missed: 1, MaxLateNs: 7e6, Held: 1}, {Ev: "evicted"},
	})
	if r.Suspicions != 2 || r.Suspected != 1 || r.Missed != 3 || r.MaxLate != 7*time.Millisecond || r.FIFO != 1 || r.Evicted != 1 ||
		r.Held != 5 {
		t.Errorf("%+v", r)
	}
}

// TestMPIProgram builds the C program and runs two loads on 2 ranks under
// Debian's mpirun, without and with the in-process detector. It needs
// mpicc and mpirun.
func TestMPIProgram(t *testing.T) {
	if _, err := exec.LookPath("mpicc"); err != nil {
		t.Skip("mpicc not installed (Debian: openmpi-bin libopenmpi-dev)")
	}
	if testing.Short() {
		t.Skip("builds libvigil and runs mpirun")
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := BuildMPI(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{b.IMB, b.IMBVigil} {
		r := MPIRun{Bin: bin, Ranks: 2, Loads: []Load{PingPong, Allreduce}, Sizes: []int{0, 64}, MaxReps: 20,
			TimeLimit: 50 * time.Millisecond, Env: []string{"VIGIL_H=5ms", "VIGIL_DELTA=500ms"}}
		o, err := r.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(o.Results) != 4 {
			t.Errorf("%s: %d results, want 4", filepath.Base(bin), len(o.Results))
		}
		if want := bin == b.IMBVigil; (o.VigilEvents >= 0) != want {
			t.Errorf("%s: vigil events %d", filepath.Base(bin), o.VigilEvents)
		}
	}
}
