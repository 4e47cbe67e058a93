package wire

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestReportRoundTrip(t *testing.T) {
	const procs = 32 // 8 nodes, 4 processes per node
	r := &Report{Procs: []ProcFailure{{20, CauseCrashed}, {21, CauseLeft}, {2, CauseHung}, {31, CauseExited}}}
	got, err := DecodeReport(AppendReport(nil, r), procs)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip: got %+v, want %+v", got, r)
	}
}

// TestReportEncoding pins the layout byte for byte: daemons of different
// builds of this version must interoperate.
func TestReportEncoding(t *testing.T) {
	r := &Report{Procs: []ProcFailure{{20, CauseNodeDown}, {0x01020304, CauseHung}}}
	want := "52" + "02000000" + "14000000" + "03" + "04030201" + "02"
	if got := hexString(AppendReport(nil, r)); got != want {
		t.Errorf("%s, want %s", got, want)
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

func TestReportDecodeErrors(t *testing.T) {
	const procs = 4
	good := AppendReport(nil, &Report{Procs: []ProcFailure{{2, CauseCrashed}}})
	for _, tc := range []struct {
		name   string
		b      []byte
		field  string
		reason string
	}{
		{"empty", nil, "daemon.type", ReasonTruncated},
		{"type", []byte{'X'}, "daemon.type", ReasonBadType},
		{"old NEWOBSERVER", []byte{'O', 1, 0, 0, 0}, "daemon.type", ReasonBadType},
		{"trailing", append(append([]byte(nil), good...), 0), "daemon", ReasonBadPayload},
		{"truncated", good[:len(good)-1], "daemon.report.procs.count", ReasonBadPayload},
		{"truncated count", good[:3], "daemon.report.procs.count", ReasonTruncated},
		{"no failure", AppendReport(nil, &Report{}), "daemon.report.procs", ReasonBadPayload},
		{"Procs[0]", AppendReport(nil, &Report{Procs: []ProcFailure{{4, CauseCrashed}}}), "daemon.report.procs[0].rank", ReasonUnknownRank},
		{"cause", AppendReport(nil, &Report{Procs: []ProcFailure{{1, CauseCrashed}, {3, 0}}}), "daemon.report.procs[1].cause", ReasonBadType},
		{"count", []byte{'R', 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 1}, "daemon.report.procs.count", ReasonBadPayload},
	} {
		m, err := DecodeReport(tc.b, procs)
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

// FuzzDecodeReport: DecodeReport never panics, fails with an *Error naming
// the field, and what it accepts re-encodes to the same bytes.
func FuzzDecodeReport(f *testing.F) {
	const procs = 32 // 8 nodes, 4 processes per node
	f.Add(AppendReport(nil, &Report{Procs: []ProcFailure{{20, CauseCrashed}, {3, CauseHung}}}))
	f.Add([]byte{'R', 255, 255, 255, 255})
	f.Add([]byte{'O', 2, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeReport(b, procs)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Field == "" {
				t.Fatalf("error without a field: %v", err)
			}
			return
		}
		if again := AppendReport(nil, m); string(again) != string(b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
	})
}
