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

// TestReported: a node's failure brings its event and every process it
// hosted (cause NodeDown) except those already reported; a process is
// reported once, whatever report brings it again; out-of-range nodes are
// ignored; Past holds the processes' events in delivery order.
func TestReported(t *testing.T) {
	l := Layout{Nodes: 4, PPN: 3}
	p, err := NewReported(l)
	if err != nil {
		t.Fatal(err)
	}
	first := p.Procs([]ProcFailure{pf(4, Crashed), pf(9, Hung)}, 2, 66)
	want := []Event{{Kind: KindProc, Rank: 4, Node: 1, Cause: "crashed", Detector: 2, DetectedUnix: 66},
		{Kind: KindProc, Rank: 9, Node: 3, Cause: "hung", Detector: 2, DetectedUnix: 66}}
	if !slices.Equal(first, want) {
		t.Fatalf("first report: %+v\nwant %+v", first, want)
	}
	if evs := p.Procs([]ProcFailure{pf(4, Left)}, 0, 67); len(evs) != 0 {
		t.Errorf("a process reported twice: %+v", evs)
	}
	node := p.Node(1, 3, 77)
	wantNode := []Event{{Kind: KindNode, Node: 1, Detector: 3, DetectedUnix: 77},
		{Kind: KindProc, Rank: 3, Node: 1, Cause: "node_down", Detector: 3, DetectedUnix: 77},
		{Kind: KindProc, Rank: 5, Node: 1, Cause: "node_down", Detector: 3, DetectedUnix: 77}}
	if !slices.Equal(node, wantNode) {
		t.Errorf("Node(1) = %+v\nwant %+v (rank 4 was reported before)", node, wantNode)
	}
	if evs := p.Node(4, 0, 78); len(evs) != 0 {
		t.Errorf("node 4 of 4: %+v", evs)
	}
	if !p.ProcReported(5) || p.ProcReported(6) {
		t.Error("ProcReported disagrees with what was added")
	}
	if past := p.Past(); !slices.Equal(past, append(want, wantNode[1:]...)) {
		t.Errorf("Past() = %+v", past)
	}
	if _, err := NewReported(Layout{}); err == nil {
		t.Error("an empty layout was accepted")
	}
}

func pf(r ranks.Rank, c Cause) ProcFailure { return ProcFailure{Rank: r, Cause: c} }

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
