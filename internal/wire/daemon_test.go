package daemon

import (
	"errors"
	"reflect"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

func TestMessageRoundTrip(t *testing.T) {
	l := Layout{Nodes: 8, PPN: 4}
	r := &Report{Source: 3, D: ranks.Of(1, 5), Nodes: []ranks.Rank{5}, Detector: 3, DetectedAt: -42,
		Procs: []ProcFailure{{20, NodeDown}, {21, NodeDown}, {2, Hung}}}
	got, err := Decode(AppendReport(nil, r), l)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip: got %+v, want %+v", got, r)
	}
	o, err := Decode(AppendNewObserver(nil, NewObserver{7}), l)
	if err != nil || o.(*NewObserver).Observer != 7 {
		t.Errorf("NEWOBSERVER: %v %v", o, err)
	}
	e, err := Decode(AppendEvicted(nil, Evicted{6}), l)
	if err != nil || e.(*Evicted).Rank != 6 {
		t.Errorf("EVICTED: %v %v", e, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	l := Layout{Nodes: 4, PPN: 1}
	good := AppendReport(nil, &Report{Source: 1, Procs: []ProcFailure{{2, Crashed}}})
	cases := map[string][]byte{
		"empty":     nil,
		"type":      {'X'},
		"observer":  AppendNewObserver(nil, NewObserver{4}),
		"evicted":   AppendEvicted(nil, Evicted{4}),
		"evicted+1": append(AppendEvicted(nil, Evicted{1}), 0),
		"trailing":  append(AppendNewObserver(nil, NewObserver{1}), 0),
		"truncated": good[:len(good)-1],
		"D count":   append([]byte{'R'}, make([]byte, 16)...),
		"Procs[0]":  AppendReport(nil, &Report{Source: 1, Procs: []ProcFailure{{4, Crashed}}}),
		"not strictly increasing": func() []byte {
			b := AppendReport(nil, &Report{Source: 0, D: ranks.Of(1, 2), Nodes: []ranks.Rank{1}})
			b[21], b[25] = 2, 1 // swap D's entries
			return b
		}(),
	}
	for name, b := range cases {
		if _, err := Decode(b, l); err == nil {
			t.Errorf("%s: decoded", name)
		} else if !errors.Is(err, ErrBadMessage) && !errors.Is(err, ErrInvalidReport) {
			t.Errorf("%s: %v wraps neither error", name, err)
		}
	}
}

// FuzzDecode: Decode never panics, and what it accepts re-encodes to the
// same bytes.
func FuzzDecode(f *testing.F) {
	l := Layout{Nodes: 8, PPN: 4}
	f.Add(AppendReport(nil, &Report{Source: 3, D: ranks.Of(1, 5), Nodes: []ranks.Rank{5}, Procs: []ProcFailure{{20, NodeDown}}}))
	f.Add(AppendNewObserver(nil, NewObserver{2}))
	f.Add(AppendEvicted(nil, Evicted{3}))
	f.Add([]byte{'R', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b, l)
		if err != nil {
			return
		}
		var again []byte
		switch m := m.(type) {
		case *Report:
			again = AppendReport(nil, m)
		case *NewObserver:
			again = AppendNewObserver(nil, *m)
		case *Evicted:
			again = AppendEvicted(nil, *m)
		}
		if string(again) != string(b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
	})
}
