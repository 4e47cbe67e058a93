package wire

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vigil-hpc/vigil/ranks"
)

func TestDaemonRoundTrip(t *testing.T) {
	const nodes, procs = 8, 32 // 8 nodes, 4 processes per node
	r := &Report{Source: 3, D: ranks.Of(1, 5), Nodes: []ranks.Rank{5}, Detector: 3, DetectedAt: -42,
		Procs: []ProcFailure{{20, CauseNodeDown}, {21, CauseNodeDown}, {2, CauseHung}}}
	got, err := DecodeDaemon(AppendDaemon(nil, r), nodes, procs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip: got %+v, want %+v", got, r)
	}
	o, err := DecodeDaemon(AppendDaemon(nil, &DaemonNewObserver{7}), nodes, procs)
	if err != nil || o.(*DaemonNewObserver).Observer != 7 {
		t.Errorf("NEWOBSERVER: %v %v", o, err)
	}
	e, err := DecodeDaemon(AppendDaemon(nil, &DaemonEvicted{6}), nodes, procs)
	if err != nil || e.(*DaemonEvicted).Rank != 6 {
		t.Errorf("EVICTED: %v %v", e, err)
	}
}

// TestDaemonEncoding pins the layout byte for byte: daemons of different
// builds of this version must interoperate.
func TestDaemonEncoding(t *testing.T) {
	for _, tc := range []struct {
		m    DaemonMessage
		want string
	}{
		{&DaemonNewObserver{Observer: 0x01020304}, "4f04030201"},
		{&DaemonEvicted{Rank: 6}, "4506000000"},
		{&Report{Source: 3, D: ranks.Of(1, 5), Nodes: []ranks.Rank{5}, Detector: 2, DetectedAt: -2,
			Procs: []ProcFailure{{20, CauseNodeDown}}},
			"52" + "03000000" + "02000000" + "feffffffffffffff" +
				"02000000" + "01000000" + "05000000" +
				"01000000" + "05000000" +
				"01000000" + "14000000" + "03"},
	} {
		if got := hexString(AppendDaemon(nil, tc.m)); got != tc.want {
			t.Errorf("%T: %s, want %s", tc.m, got, tc.want)
		}
	}
}

func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	var sb strings.Builder
	for _, c := range b {
		sb.WriteByte(digits[c>>4])
		sb.WriteByte(digits[c&15])
	}
	return sb.String()
}

func TestDaemonDecodeErrors(t *testing.T) {
	const nodes, procs = 4, 4 // 4 nodes, 1 process per node
	good := AppendDaemon(nil, &Report{Source: 1, Procs: []ProcFailure{{2, CauseCrashed}}})
	for _, tc := range []struct {
		name   string
		b      []byte
		field  string
		reason string
	}{
		{"empty", nil, "daemon.type", ReasonTruncated},
		{"type", []byte{'X'}, "daemon.type", ReasonBadType},
		{"observer", AppendDaemon(nil, &DaemonNewObserver{4}), "daemon.newobserver.observer", ReasonUnknownRank},
		{"evicted", AppendDaemon(nil, &DaemonEvicted{4}), "daemon.evicted.rank", ReasonUnknownRank},
		{"evicted+1", append(AppendDaemon(nil, &DaemonEvicted{1}), 0), "daemon", ReasonBadPayload},
		{"trailing", append(AppendDaemon(nil, &DaemonNewObserver{1}), 0), "daemon", ReasonBadPayload},
		{"truncated", good[:len(good)-1], "daemon.report.procs.count", ReasonBadPayload},
		{"truncated source", good[:3], "daemon.report.source", ReasonTruncated},
		{"D count", append([]byte{'R'}, make([]byte, 16)...), "daemon.report.d.count", ReasonTruncated},
		{"Procs[0]", AppendDaemon(nil, &Report{Source: 1, Procs: []ProcFailure{{4, CauseCrashed}}}), "daemon.report.procs[0].rank", ReasonUnknownRank},
		{"not strictly increasing", func() []byte {
			b := AppendDaemon(nil, &Report{Source: 0, D: ranks.Of(1, 2), Nodes: []ranks.Rank{1}})
			b[21], b[25] = 2, 1 // swap D's entries
			return b
		}(), "daemon.report.d[1]", ReasonBadPayload},
	} {
		m, err := DecodeDaemon(tc.b, nodes, procs)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: decoded %+v, err %v: want an *Error", tc.name, m, err)
			continue
		}
		if e.Field != tc.field || e.Reason() != tc.reason || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want field %s, reason %s", tc.name, err, tc.field, tc.reason)
		}
	}
}

func TestReportValidate(t *testing.T) {
	const nodes, procs = 4, 8 // 4 nodes, 2 processes per node
	good := Report{Source: 1, D: ranks.Of(2), Nodes: []ranks.Rank{2}, Procs: []ProcFailure{{4, CauseNodeDown}}, Detector: 1}
	if err := good.Validate(nodes, procs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field, reason string
		mutate        func(r *Report)
	}{
		{"daemon.report.source", ReasonUnknownRank, func(r *Report) { r.Source = 4 }},
		{"daemon.report.detector", ReasonUnknownRank, func(r *Report) { r.Detector = 9 }},
		{"daemon.report", ReasonBadPayload, func(r *Report) { r.Nodes, r.Procs = nil, nil }},
		{"daemon.report.d", ReasonBadPayload, func(r *Report) { r.D = ranks.Of(1) }},
		{"daemon.report.d[1]", ReasonUnknownRank, func(r *Report) { r.D = ranks.Of(2, 4) }},
		{"daemon.report.nodes[0]", ReasonUnknownRank, func(r *Report) { r.Nodes = []ranks.Rank{4} }},
		{"daemon.report.procs[0].rank", ReasonUnknownRank, func(r *Report) { r.Procs = []ProcFailure{{8, CauseCrashed}} }},
		{"daemon.report.procs[0].cause", ReasonBadType, func(r *Report) { r.Procs = []ProcFailure{{4, 9}} }},
	} {
		r := good
		tc.mutate(&r)
		err := r.Validate(nodes, procs)
		var e *Error
		if !errors.As(err, &e) || e.Field != tc.field || e.Reason() != tc.reason {
			t.Errorf("%s: %v, want reason %s", tc.field, err, tc.reason)
		} else if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %q does not name the field", tc.field, err)
		}
	}
}

func TestCauseString(t *testing.T) {
	for _, tc := range []struct {
		c     Cause
		name  string
		valid bool
	}{
		{CauseCrashed, "crashed", true}, {CauseHung, "hung", true}, {CauseNodeDown, "node_down", true},
		{CauseLeft, "left", true}, {CauseExited, "exited", true}, {0, "cause(0)", false}, {6, "cause(6)", false},
	} {
		if tc.c.String() != tc.name || tc.c.Valid() != tc.valid {
			t.Errorf("Cause(%d): %q, valid %v", tc.c, tc.c.String(), tc.c.Valid())
		}
	}
}

// FuzzDecodeDaemon: DecodeDaemon never panics, fails with an *Error naming
// the field, and what it accepts re-encodes to the same bytes.
func FuzzDecodeDaemon(f *testing.F) {
	const nodes, procs = 8, 32 // 8 nodes, 4 processes per node
	f.Add(AppendDaemon(nil, &Report{Source: 3, D: ranks.Of(1, 5), Nodes: []ranks.Rank{5}, Procs: []ProcFailure{{20, CauseNodeDown}}}))
	f.Add(AppendDaemon(nil, &DaemonNewObserver{2}))
	f.Add(AppendDaemon(nil, &DaemonEvicted{3}))
	f.Add([]byte{'R', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeDaemon(b, nodes, procs)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			return
		}
		if again := AppendDaemon(nil, m); string(again) != string(b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
	})
}
