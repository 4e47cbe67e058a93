package launch

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestLineRankZero: a "dead" line names rank 0 as the dead rank and as the
// detector (they used to vanish under omitempty), and reads back the same;
// other lines leave the dead-line fields out.
func TestLineRankZero(t *testing.T) {
	l := Line{Ev: "dead", Rank: 3, Mono: 5, Dead: 0, Detector: 0, DetectedUnix: 7, DeliveredMono: 9}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"dead":0`, `"detector":0`, `"ev":"dead"`, `"rank":3`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	if strings.Count(string(b), `"dead":`) != 1 {
		t.Errorf("%s: dead twice", b)
	}
	var back Line
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, l) {
		t.Errorf("read back %+v, %v; want %+v", back, err, l)
	}
	b, _ = json.Marshal(Line{Ev: "ready", Rank: 0, Addr: "127.0.0.1:1"})
	if strings.Contains(string(b), "dead") || strings.Contains(string(b), "detector") || !strings.Contains(string(b), `"rank":0`) {
		t.Errorf("ready line %s", b)
	}
}

// TestLineSchemaRoundTrip: a line from rank 0 about rank 0 carries the
// schema version, rank 0, dead 0 and detector 0, and reads back the same.
func TestLineSchemaRoundTrip(t *testing.T) {
	l := Line{V: SchemaVersion, Ev: "dead", Rank: 0, Mono: 11, Dead: 0, Detector: 0, DetectedUnix: 13, DeliveredMono: 17}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"v":1`, `"rank":0`, `"dead":0`, `"detector":0`, `"mono":11`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	var back Line
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, l) {
		t.Errorf("read back %+v, %v; want %+v", back, err, l)
	}
	// A stats line carries the node counters and the rejections per
	// reason.
	st := Line{V: SchemaVersion, Ev: "stats", Rank: 0, Mono: 19, Rejected: 3, DeathsLearned: 2, Departures: 1,
		Reported: 1, Agreements: 4, RejectedBy: map[string]uint64{"bad_tag": 2, "stale": 1},
		BytesSent: 300, AgreeCalls: 2, AgreeNs: 5000, AgreeMaxNs: 3000,
		ByKind: map[string]KindCount{"bcast": {Sent: 2, Recv: 1, BytesSent: 60, BytesRecv: 30}}}
	if b, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"deaths_learned":2`, `"departures":1`, `"reported":1`, `"agreements":4`,
		`"rejected_by":{"bad_tag":2,"stale":1}`, `"bytes_sent":300`, `"agree_calls":2`, `"agree_ns":5000`, `"agree_max_ns":3000`,
		`"by_kind":{"bcast":{"sent":2,"recv":1,"bytes_sent":60,"bytes_recv":30}}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	back = Line{}
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, st) {
		t.Errorf("read back %+v, %v; want %+v", back, err, st)
	}
	// A line without "v" (printed before the schema had a version) reads
	// as version 0.
	var old Line
	if err := json.Unmarshal([]byte(`{"ev":"ready","rank":2,"mono":1}`), &old); err != nil || old.V != 0 || old.Rank != 2 {
		t.Errorf("unversioned line read as %+v, %v", old, err)
	}
}

// TestLineFieldsAlwaysPresent: a line of each kind carries every field of
// its kind at zero (rank 0, false, empty objects), and none of another
// kind's fields left at zero.
func TestLineFieldsAlwaysPresent(t *testing.T) {
	want := map[string][]string{
		"ready": {"addr", "metrics"},
		"dead":  {"dead", "left", "detector", "detected_unix", "delivered_mono"},
		"stats": {"missed", "max_late_ns", "rejected", "realtime", "native_emitter", "process_rt", "hb_sent", "msgs_sent",
			"msgs_recv", "msgs_dropped", "bcasts_started", "bcasts_forwarded", "bad", "loop_wakes", "deaths_learned",
			"departures", "reported", "agreements", "rejected_by", "bytes_sent", "bytes_recv", "agree_calls", "agree_ns",
			"agree_max_ns", "by_kind"},
		"evicted": {"reason"}, "failed": nil, "bye": nil,
	}
	for ev, fields := range want {
		b, err := json.Marshal(Line{V: SchemaVersion, Ev: ev})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		common := []string{"v", "ev", "rank", "mono"}
		for _, f := range append(common, fields...) {
			if _, ok := m[f]; !ok {
				t.Errorf("%s line %s lacks %q", ev, b, f)
			}
		}
		if len(m) != len(common)+len(fields) {
			t.Errorf("%s line %s: %d fields, want %d", ev, b, len(m), len(common)+len(fields))
		}
	}
	// A by_kind entry carries its four counters even at zero.
	b, _ := json.Marshal(Line{Ev: "stats", ByKind: map[string]KindCount{"probe": {Sent: 1}}})
	if !strings.Contains(string(b), `"by_kind":{"probe":{"sent":1,"recv":0,"bytes_sent":0,"bytes_recv":0}}`) {
		t.Errorf("by_kind written as %s", b)
	}
}
