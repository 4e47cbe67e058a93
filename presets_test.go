package vigil

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/presets.md's table from the presets")

// presetsMarkdown renders the presets' settings, after node's defaults.
func presetsMarkdown() string {
	var b strings.Builder
	b.WriteString("| preset | h | δ | check period | start-up grace | real-time | broadcast | transport, heartbeat |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, p := range Presets {
		c := p.Config()
		n := c.Config
		n.Size = 1
		n = n.WithDefaults()
		fmt.Fprintf(&b, "| `vigil.%s()` | %v | %v | %v | %v | %v | %s | %s, %s |\n", p.Name, n.HeartbeatPeriod, n.SuspectTimeout,
			n.CheckPeriod, n.StartGrace, n.RealTime, n.Broadcast, c.Transport, c.Heartbeat)
	}
	return b.String()
}

// TestPresets: every preset is valid, and docs/presets.md lists them as
// they are (-update rewrites its table).
func TestPresets(t *testing.T) {
	for _, p := range Presets {
		c := p.Config()
		c.Size = 64
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	const path = "docs/presets.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- generated from vigil.Presets: begin -->\n", "<!-- generated from vigil.Presets: end -->\n"
	pre, rest, ok1 := strings.Cut(string(b), begin)
	_, post, ok2 := strings.Cut(rest, end)
	if !ok1 || !ok2 {
		t.Fatalf("%s: no markers", path)
	}
	want := pre + begin + presetsMarkdown() + end + post
	switch {
	case want == string(b):
	case *updateDocs:
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	default:
		t.Errorf("%s differs from the presets: run go test -run TestPresets -update .", path)
	}
}
