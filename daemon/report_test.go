package daemon

import (
	"errors"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
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

// flood runs seed 003's Algorithm 1 among n daemons of layout l: start is
// called at daemon src, then every report is delivered (in random order)
// to its destination unless that daemon is in dead. It returns what each
// daemon learned and the number of messages sent.
func flood(t *testing.T, l Layout, dead ranks.Set, rng *rand.Rand, start func(p *Propagation) (Report, []ranks.Rank, Fresh), src ranks.Rank) (map[ranks.Rank]Fresh, int) {
	t.Helper()
	props := make([]*Propagation, l.Nodes)
	for i := range props {
		var err error
		if props[i], err = NewPropagation(ranks.Rank(i), l); err != nil {
			t.Fatal(err)
		}
	}
	type msg struct {
		to ranks.Rank
		r  Report
	}
	learned := map[ranks.Rank]Fresh{}
	r, to, fresh := start(props[src])
	learned[src] = fresh
	var q []msg
	for _, d := range to {
		q = append(q, msg{d, r})
	}
	sent := len(to)
	for len(q) > 0 {
		i := rng.IntN(len(q))
		m := q[i]
		q = slices.Delete(q, i, i+1)
		if dead.Has(m.to) {
			continue
		}
		fwd, f, err := props[m.to].Forward(m.r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !f.Empty() {
			if _, dup := learned[m.to]; dup {
				t.Fatalf("daemon %d learned twice", m.to)
			}
			learned[m.to] = f
		}
		for _, d := range fwd {
			q = append(q, msg{d, m.r})
		}
		sent += len(fwd)
	}
	return learned, sent
}

// TestPropagationNodeFailure: a node's failure reaches every live daemon
// with every process it hosted, once, even when other daemons die during
// the broadcast (fewer than ⌊log2 m⌋ of them, the BMG's guarantee).
func TestPropagationNodeFailure(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{2, 3, 5, 8, 13, 32, 64} {
		l := Layout{Nodes: n, PPN: 3}
		for trial := 0; trial < 50; trial++ {
			failed := ranks.Rank(rng.IntN(n))
			src := (failed + 1) % ranks.Rank(n) // its observer
			if src == failed {
				continue
			}
			var crashed ranks.Set // daemons dying during the broadcast
			k := 0
			for m := n - 1; m > 1; m >>= 1 {
				k++
			}
			for i := 0; i < k-1; i++ {
				if c := ranks.Rank(rng.IntN(n)); c != src && c != failed {
					crashed.Add(c)
				}
			}
			D := ranks.Of(failed)
			learned, _ := flood(t, l, crashed, rng, func(p *Propagation) (Report, []ranks.Rank, Fresh) {
				return p.StartNode(failed, D, 1)
			}, src)
			for d := ranks.Rank(0); d < ranks.Rank(n); d++ {
				if d == failed || crashed.Has(d) {
					continue
				}
				f, ok := learned[d]
				if !ok {
					t.Fatalf("n=%d: daemon %d never learned of node %d (crashed during the broadcast: %v)", n, d, failed, crashed)
				}
				if !slices.Equal(f.Nodes, []ranks.Rank{failed}) || len(f.Procs) != 3 {
					t.Fatalf("daemon %d learned %+v", d, f)
				}
				for i, p := range f.Procs {
					if p.Rank != l.Hosted(failed)[i] || p.Cause != NodeDown {
						t.Fatalf("daemon %d: Procs[%d] = %+v", d, i, p)
					}
				}
			}
		}
	}
}

// TestPropagationMessages: without failures, every daemon forwards a
// process failure once, so the messages are exactly the BMG's edges
// (seed 003: "all edges of the BMG will carry exactly one message").
func TestPropagationMessages(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{4, 8, 16, 12} {
		l := Layout{Nodes: n, PPN: 2}
		learned, sent := flood(t, l, ranks.Set{}, rng, func(p *Propagation) (Report, []ranks.Rank, Fresh) {
			return p.StartProc(5, Crashed, ranks.Set{}, 1)
		}, 2)
		if len(learned) != n {
			t.Fatalf("n=%d: %d daemons learned", n, len(learned))
		}
		var bmg int
		for i := 0; i < n; i++ {
			nb := NewPropagationMust(t, ranks.Rank(i), l).neighbours(2, &ranks.Set{}, nil)
			bmg += len(nb)
		}
		if sent != bmg {
			t.Errorf("n=%d: %d messages, want %d (one per directed BMG edge)", n, sent, bmg)
		}
	}
}

func NewPropagationMust(t *testing.T, self ranks.Rank, l Layout) *Propagation {
	p, err := NewPropagation(self, l)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPropagationContained: a report whose failures are all known is
// dropped (msg ⊆ Reported_j), and a second StartProc of the same rank does
// nothing.
func TestPropagationContained(t *testing.T) {
	l := Layout{Nodes: 4, PPN: 2}
	p := NewPropagationMust(t, 1, l)
	r, to, f := p.StartNode(2, ranks.Of(2), 7)
	if len(to) == 0 || len(f.Procs) != 2 || !p.NodeReported(2) || !p.ProcReported(4) || !p.ProcReported(5) {
		t.Fatalf("StartNode: to %v fresh %+v", to, f)
	}
	if _, to, f := p.StartProc(4, Crashed, ranks.Of(2), 8); to != nil || !f.Empty() {
		t.Errorf("StartProc of a reported rank sent %v, fresh %+v", to, f)
	}
	q := NewPropagationMust(t, 3, l)
	if _, f, _ := q.Forward(r, nil); f.Empty() {
		t.Fatal("first reception taught nothing")
	}
	if to, f, err := q.Forward(r, nil); err != nil || to != nil || !f.Empty() {
		t.Errorf("second reception: %v %+v %v", to, f, err)
	}
	if started, _ := p.Counters(); started != 1 {
		t.Errorf("started = %d", started)
	}
}

// TestReportValidate: Forward checks a report against the layout (the
// checks themselves are wire.Report.Validate's, tested in internal/wire);
// the error wraps ErrInvalidReport and names the field.
func TestReportValidate(t *testing.T) {
	l := Layout{Nodes: 4, PPN: 2}
	good := Report{Source: 1, D: ranks.Of(2), Nodes: []ranks.Rank{2}, Procs: []ProcFailure{{Rank: 4, Cause: NodeDown}}, Detector: 1}
	if err := validateReport(&good, l); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(r *Report){
		"report.source":         func(r *Report) { r.Source = 4 },
		"report.detector":       func(r *Report) { r.Detector = 9 },
		"report":                func(r *Report) { r.Nodes, r.Procs = nil, nil },
		"report.d":              func(r *Report) { r.D = ranks.Of(1) },
		"report.nodes[0]":       func(r *Report) { r.Nodes = []ranks.Rank{4} },
		"report.procs[0].rank":  func(r *Report) { r.Procs = []ProcFailure{{Rank: 8, Cause: Crashed}} },
		"report.procs[0].cause": func(r *Report) { r.Procs = []ProcFailure{{Rank: 4, Cause: 9}} },
	}
	for field, mutate := range cases {
		r := good
		mutate(&r)
		p, err := NewPropagation(0, l)
		if err != nil {
			t.Fatal(err)
		}
		to, f, err := p.Forward(r, nil)
		if !errors.Is(err, ErrInvalidReport) || to != nil || !f.Empty() {
			t.Errorf("%s: %v %v %+v", field, err, to, f)
		} else if !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %q does not name the field", field, err)
		}
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
