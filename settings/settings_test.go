package settings

import (
	"flag"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the generated tables of docs/ from the settings table")

// TestTable: every row is complete and consistent, and no name is used
// by two rows in one interface.
func TestTable(t *testing.T) {
	seen := map[string]string{}
	claim := func(s *Setting, what string) {
		if prev, ok := seen[what]; ok {
			t.Errorf("%s: %s is also %s's", s.Key, what, prev)
		}
		seen[what] = s.Key
	}
	for _, s := range All {
		claim(s, "key "+s.Key)
		if s.Title == "" || s.Doc == "" || s.Default == "" {
			t.Errorf("%s: no title, doc or default", s.Key)
		}
		if len(s.Go) == 0 && s.Flag == "" && s.Env == "" && len(s.C) == 0 {
			t.Errorf("%s: in no interface", s.Key)
		}
		for _, c := range s.Commands {
			claim(s, "flag -"+s.Flag+" of "+c)
		}
		if (s.Flag == "") != (len(s.Commands) == 0) {
			t.Errorf("%s: flag %q with commands %v", s.Key, s.Flag, s.Commands)
		}
		if s.Env != "" {
			claim(s, "variable "+s.Env)
			if s.EnvFor == "" {
				t.Errorf("%s: %s without EnvFor", s.Key, s.Env)
			}
		}
		for _, c := range s.C {
			claim(s, "C field "+c)
		}
		for _, g := range s.Go {
			claim(s, "Go field "+g)
		}
		if s.Bounded() && (s.Kind != Duration || s.Min < 0 || s.Max < s.Min) {
			t.Errorf("%s: bounds %v to %v of a %v", s.Key, s.Min, s.Max, s.Kind)
		}
		if (s.Kind == Choice) != (len(s.Choices) > 0) {
			t.Errorf("%s: a %v with choices %v", s.Key, s.Kind, s.Choices)
		}
		if s.Flag == "" {
			continue
		}
		var err error
		switch s.Kind {
		case Duration:
			_, err = time.ParseDuration(s.FlagDefault)
		case Int:
			_, err = strconv.Atoi(s.FlagDefault)
		case Bool:
			_, err = strconv.ParseBool(s.FlagDefault)
		case Choice:
			if !slices.Contains(s.Choices, s.FlagDefault) {
				t.Errorf("%s: flag default %q not one of %v", s.Key, s.FlagDefault, s.Choices)
			}
		}
		if err != nil {
			t.Errorf("%s: flag default %q: %v", s.Key, s.FlagDefault, err)
		}
	}
}

// TestParseEnv: variables parse by kind, with errors naming them.
func TestParseEnv(t *testing.T) {
	env := map[string]string{"VIGIL_H": "1ms", "VIGIL_DELTA": "-1s", "VIGIL_GOSSIP_STEP": "-1us", "VIGIL_GOSSIP_T": "x",
		"VIGIL_REALTIME": "yes", "VIGIL_MODE": "star", "VIGIL_HEARTBEAT": "udp"}
	get := func(k string) string { return env[k] }
	var d time.Duration
	var i int
	var b bool
	var s string
	for _, tc := range []struct {
		s    *Setting
		dst  any
		want string // "": no error
	}{
		{H, &d, ""},
		{Delta, &d, ""}, // a bounded duration: the bounds refuse it, naming the bound
		{GossipStep, &d, `VIGIL_GOSSIP_STEP="-1us" is not a duration such as 1ms`},
		{GossipT, &i, `VIGIL_GOSSIP_T="x" is not an integer`},
		{RealTime, &b, `VIGIL_REALTIME="yes": want 0 or 1`},
		{Mode, &s, `VIGIL_MODE="star": want ring or sporadic`},
		{Heartbeat, &s, ""},
		{Grace, &i, "cannot read grace (duration) into *int"},
	} {
		err := ParseEnv(tc.s, get, tc.dst)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.s.Env, err, tc.want)
		}
	}
	if d != -time.Second || s != "udp" {
		t.Errorf("read δ %v, heartbeat %q", d, s)
	}
	d = 7
	if err := ParseEnv(Check, get, &d); err != nil || d != 7 {
		t.Errorf("unset VIGIL_CHECK: %v, %v", err, d)
	}
}

// TestDocs: docs/configuration.md holds Markdown() and
// docs/configuration-bounds.md BoundsMarkdown(), each between its
// markers. With -update the test rewrites them.
func TestDocs(t *testing.T) {
	for _, d := range []struct{ path, text string }{
		{"../docs/configuration.md", Markdown()},
		{"../docs/configuration-bounds.md", BoundsMarkdown()},
	} {
		b, err := os.ReadFile(d.path)
		if err != nil {
			t.Fatal(err)
		}
		const begin, end = "<!-- generated from settings.All: begin -->\n", "<!-- generated from settings.All: end -->\n"
		pre, rest, ok1 := strings.Cut(string(b), begin)
		_, post, ok2 := strings.Cut(rest, end)
		if !ok1 || !ok2 {
			t.Fatalf("%s: no %q … %q markers", d.path, begin, end)
		}
		want := pre + begin + d.text + end + post
		if want == string(b) {
			continue
		}
		if *update {
			if err := os.WriteFile(d.path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s differs from the settings table: run go test ./settings -run TestDocs -update", d.path)
	}
}

// TestCheckChoice: a value not among the choices is refused, naming the
// setting as the interface does.
func TestCheckChoice(t *testing.T) {
	for _, tc := range []struct {
		s    *Setting
		n    Names
		v    string
		want string
	}{
		{Transport, FlagNames, "verbs", ""},
		{Transport, FlagNames, "ib", `-transport "ib": want tcp or verbs`},
		{Broadcast, FlagNames, "flood", `-broadcast "flood": want one of hba, bmg, ocg, ccg, fcg, ctree`},
		{Mode, EnvNames, "star", `VIGIL_MODE="star": want ring or sporadic`},
		{Partition, CNames, "x", `vigil_config.partition "x": want failstop or continue`},
	} {
		err := CheckChoice(tc.s, tc.n, tc.v)
		if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
			t.Errorf("%s %q: %v, want %q", tc.s.Key, tc.v, err, tc.want)
		}
	}
}
