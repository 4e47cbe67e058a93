package daemon

import (
	"errors"
	"os/exec"
	"slices"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

func TestLayout(t *testing.T) {
	l := Layout{Nodes: 3, PPN: 4}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := l.Hosted(2); !slices.Equal(got, []ranks.Rank{8, 9, 10, 11}) {
		t.Errorf("Hosted(2) = %v", got)
	}
	if d, ok := l.NodeOf(7); !ok || d != 1 {
		t.Errorf("NodeOf(7) = %d, %v", d, ok)
	}
	if _, ok := l.NodeOf(12); ok {
		t.Error("NodeOf(12) found a node in a 12-rank job")
	}
	if l.Hosted(3) != nil {
		t.Error("Hosted(3) of a 3-node layout is not empty")
	}
	for _, bad := range []Layout{{Nodes: 0}, {Nodes: 2, PPN: -1}, {Nodes: 1 << 20, PPN: 1 << 12}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

// TestReported: a node's failure brings every process it hosted (cause
// NodeDown) except those already reported; a process is reported once,
// whatever report brings it again; out-of-range nodes are ignored.
func TestReported(t *testing.T) {
	l := Layout{Nodes: 4, PPN: 3}
	p, err := NewReported(l)
	if err != nil {
		t.Fatal(err)
	}
	f := p.Procs([]ProcFailure{pf(4, Crashed), pf(9, Hung)})
	if len(f.Procs) != 2 || len(f.Nodes) != 0 {
		t.Fatalf("first report: %+v", f)
	}
	if f := p.Procs([]ProcFailure{pf(4, Left)}); !f.Empty() {
		t.Errorf("a process reported twice: %+v", f)
	}
	f = p.Node(1)
	want := Fresh{Nodes: []ranks.Rank{1}, Procs: []ProcFailure{pf(3, NodeDown), pf(5, NodeDown)}}
	if !slices.Equal(f.Nodes, want.Nodes) || !slices.Equal(f.Procs, want.Procs) {
		t.Errorf("Node(1) = %+v, want %+v (rank 4 was reported before)", f, want)
	}
	if f := p.Node(1); !f.Empty() {
		t.Errorf("a node reported twice: %+v", f)
	}
	if f := p.Node(4); !f.Empty() {
		t.Errorf("node 4 of 4: %+v", f)
	}
	if !p.NodeReported(1) || p.NodeReported(2) || !p.ProcReported(5) || p.ProcReported(6) {
		t.Error("NodeReported/ProcReported disagree with what was added")
	}
	if _, err := NewReported(Layout{}); err == nil {
		t.Error("an empty layout was accepted")
	}
}

func pf(r ranks.Rank, c Cause) ProcFailure { return ProcFailure{Rank: r, Cause: c} }

// TestEvents: nodes first, then processes, each with its node, cause and
// detector.
func TestEvents(t *testing.T) {
	l := Layout{Nodes: 3, PPN: 2}
	evs := events(Fresh{Nodes: []ranks.Rank{2}, Procs: []ProcFailure{pf(4, NodeDown), pf(1, Hung)}}, l, 1, 77)
	want := []Event{{Kind: KindNode, Node: 2, Detector: 1, DetectedUnix: 77},
		{Kind: KindProc, Rank: 4, Node: 2, Cause: "node_down", Detector: 1, DetectedUnix: 77},
		{Kind: KindProc, Rank: 1, Node: 0, Cause: "hung", Detector: 1, DetectedUnix: 77}}
	if !slices.Equal(evs, want) {
		t.Errorf("events %+v\nwant %+v", evs, want)
	}
}

// TestExitCause classifies real children's ends.
func TestExitCause(t *testing.T) {
	for _, c := range []struct {
		script string
		want   Cause
	}{{"exit 0", Left}, {"exit 3", Exited}, {"kill -9 $$", Crashed}, {"kill -TERM $$", Crashed}} {
		cmd := exec.Command("sh", "-c", c.script)
		err := cmd.Run()
		if got := exitCause(err, cmd.ProcessState); got != c.want {
			t.Errorf("sh -c %q: %v, want %v", c.script, got, c.want)
		}
	}
	if exitCause(errors.New("wait failed"), nil) != Crashed {
		t.Error("no process state: not Crashed")
	}
}
