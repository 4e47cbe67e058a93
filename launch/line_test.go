package launch

import (
	"encoding/json"
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
	if err := json.Unmarshal(b, &back); err != nil || back != l {
		t.Errorf("read back %+v, %v; want %+v", back, err, l)
	}
	b, _ = json.Marshal(Line{Ev: "ready", Rank: 0, Addr: "127.0.0.1:1"})
	if strings.Contains(string(b), "dead") || strings.Contains(string(b), "detector") || !strings.Contains(string(b), `"rank":0`) {
		t.Errorf("ready line %s", b)
	}
}
