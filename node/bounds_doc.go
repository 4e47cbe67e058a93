package node

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// BoundsMarkdown renders Settings as the Markdown table of
// docs/configuration-bounds.md (a test keeps the two equal).
func BoundsMarkdown() string {
	var b strings.Builder
	b.WriteString("| setting | Go (`node.Config`, `vigil.Config`) | flag (`vigil`) | environment (`vigil_init_from_env`) | C (`vigil_config`) | minimum | maximum | 0 or unset | also |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	or := func(s, v string) string {
		if s == "" {
			return "—"
		}
		return v
	}
	show := func(d time.Duration) string {
		if d == math.MaxInt64 {
			return "none"
		}
		return d.String()
	}
	for _, s := range Settings {
		c := or(s.C, "`"+s.C+"`")
		if s.CMillis {
			c += " (ms)"
		} else if s.C != "" && !s.Bool {
			c += " (ns)"
		}
		lo, hi := show(s.Min), show(s.Max)
		if s.Bool {
			lo, hi = "—", "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Title, or(s.Field, "`"+s.Field+"`"),
			or(s.Flag, "`-"+s.Flag+"`"), or(s.Env, "`"+s.Env+"`"), c, lo, hi, s.Default, or(s.Rule, s.Rule))
	}
	return b.String()
}
