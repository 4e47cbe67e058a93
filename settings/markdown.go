package settings

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// BoundsTable lists the settings of docs/configuration-bounds.md.
var BoundsTable = []*Setting{H, Delta, Check, Grace, RealTime, StartTimeout, RunFor}

// BoundsMarkdown renders BoundsTable as the Markdown table of
// docs/configuration-bounds.md (a test keeps the two equal).
func BoundsMarkdown() string {
	var b strings.Builder
	b.WriteString("| setting | Go (`node.Config`, `vigil.Config`) | flag (`vigil`) | environment (`vigil_init_from_env`) | C (`vigil_config`) | minimum | maximum | 0 or unset | also |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	show := func(d time.Duration) string {
		if d == math.MaxInt64 {
			return "none"
		}
		return d.String()
	}
	for _, s := range BoundsTable {
		field := ""
		if len(s.Go) > 0 {
			field = s.Go[0][strings.LastIndex(s.Go[0], ".")+1:]
		}
		lo, hi := show(s.Min), show(s.Max)
		if !s.Bounded() {
			lo, hi = "—", "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Title, code(field),
			flagName(s.Flag), code(s.Env), cField(s), lo, hi, s.Default, or(s.Rule))
	}
	return b.String()
}

// Markdown renders All as the reference table of docs/configuration.md
// (a test keeps the two equal).
func Markdown() string {
	var b strings.Builder
	b.WriteString("| setting | Go | flag (`vigil` commands: default) | environment | C (`vigil_config`) | kind | 0 or unset | bounds, values | meaning |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range All {
		var gos []string
		for _, g := range s.Go {
			gos = append(gos, "`"+g+"`")
		}
		fl := "—"
		if s.Flag != "" {
			def := s.FlagDefault
			if def == "" {
				def = `""`
			}
			fl = fmt.Sprintf("`-%s` (%s: `%s`)", s.Flag, strings.Join(s.Commands, ", "), def)
		}
		env := code(s.Env)
		if s.Env != "" && s.EnvFor != EnvLib {
			env += " (" + s.EnvFor + ")"
		}
		kind := s.Kind.String()
		if s.Kind == Choice {
			kind = strings.Join(s.Choices, ", ")
		}
		bounds := s.Rule
		if s.Bounded() {
			hi := s.Max.String()
			if s.Max == math.MaxInt64 {
				hi = "∞"
			}
			bounds = strings.TrimSuffix(fmt.Sprintf("%v to %s; %s", s.Min, hi, s.Rule), "; ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Title, or(strings.Join(gos, ", ")),
			fl, env, cField(s), kind, s.Default, or(bounds), escape(s.Doc))
	}
	return b.String()
}

// cField is s's C fields with their unit, or "—".
func cField(s *Setting) string {
	if len(s.C) == 0 {
		return "—"
	}
	c := "`" + strings.Join(s.C, "`, `") + "`"
	if s.CUnit != "" {
		c += " (" + s.CUnit + ")"
	}
	return c
}

func code(s string) string {
	if s == "" {
		return "—"
	}
	return "`" + s + "`"
}

func flagName(s string) string {
	if s == "" {
		return "—"
	}
	return "`-" + s + "`"
}

func or(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// escape keeps text inside a Markdown table cell.
func escape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
