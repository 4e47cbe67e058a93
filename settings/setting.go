// Package settings is the one table of Vigil's user settings: for each,
// its name in every interface that has it (the Go configurations, the
// flags of the vigil command, libvigil's environment variables and
// vigil_config's C fields), its kind, default, bounds and documentation.
//
// The interfaces are driven by it: the vigil command defines its flags
// from it (name, usage, default), libvigil reads its environment through
// it (ParseEnv), node.Config.Validate checks the bounded durations it
// lists, errors name a setting as the caller's interface does
// (BoundError.In), and the reference in docs/configuration.md is rendered
// from it (Markdown). The tests of each interface fail when the interface
// and the table disagree.
//
// The package imports nothing of Vigil's, so that every interface can
// import it.
package settings

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is the type of a setting's value.
type Kind int

// The kinds.
const (
	Duration Kind = iota // a time.Duration; flags and variables take "10ms"
	Int                  // an integer
	Bool                 // on or off; variables take 0 or 1
	String               // free text, such as an address
	Choice               // one of Choices
	Value                // a Go value without a text form (a function, a logger)
)

var kindNames = [...]string{"duration", "integer", "bool", "string", "choice", "Go value"}

// String names k.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Who reads or sets an environment variable (Setting.EnvFor).
const (
	// EnvLib: the user sets it, vigil_init_from_env reads it (and the PMPI
	// library).
	EnvLib = "libvigil"
	// EnvLibDaemon: the user (or `vigil daemon`) sets it, libvigil's
	// daemon mode reads it (vigil_daemon.h).
	EnvLibDaemon = "libvigil daemon mode"
	// EnvLauncher: `vigil run` (or `vigil daemon`) sets it for the
	// processes it starts; the bootstrap reads it.
	EnvLauncher = "set by the launcher"
	// EnvCommand: the user sets it for a vigil command (named in Doc).
	EnvCommand = "vigil command"
	// EnvVerbs: the user sets it, vigil.Join reads it over verbs.
	EnvVerbs = "vigil.Join over verbs"
	// EnvPMPI: the user sets it, the PMPI library (libvigil_pmpi) reads it.
	EnvPMPI = "PMPI library"
)

// Setting is one user setting under its name in every interface that
// has it ("" or nil where an interface does not).
type Setting struct {
	// Key identifies the row (unique; the flag's name where there is one).
	Key string
	// Title is what it is, for the docs.
	Title string
	// Doc is the flag's usage and the docs' meaning.
	Doc string
	// Go are the Go fields, package-qualified ("node.Config.HeartbeatPeriod",
	// "vigil.Config.Addresses.Bind"); Go[0] names the setting in errors.
	Go []string
	// Flag is the vigil command's flag, without the dash, defined by each
	// of Commands with the default FlagDefault (as flag.Flag.DefValue).
	Flag        string
	Commands    []string
	FlagDefault string
	// Env is the environment variable, read or set as EnvFor says.
	Env, EnvFor string
	// C are vigil_config's fields (C[0] names the setting in errors), in
	// unit CUnit ("ns", "ms" or "").
	C     []string
	CUnit string
	// Kind is the value's type; Choices the values of a Choice.
	Kind    Kind
	Choices []string
	// Min and Max bound an explicit duration (0 takes Default); both 0:
	// no bound here. A bound that depends on another setting is in Rule.
	Min, Max time.Duration
	// Default describes the value an unset setting (0, "", an unset
	// variable, a zeroed C field) stands for.
	Default string
	// Rule states the bounds and values not in Min and Max, for the docs.
	Rule string
}

// Bounded reports whether s has Min and Max.
func (s *Setting) Bounded() bool { return s.Max != 0 }

// GoName is s's Go field without its package ("Config.HeartbeatPeriod").
func (s *Setting) GoName() string {
	if len(s.Go) == 0 {
		return ""
	}
	_, f, _ := strings.Cut(s.Go[0], ".")
	return f
}

// CName is s's first C field ("" if none).
func (s *Setting) CName() string {
	if len(s.C) == 0 {
		return ""
	}
	return s.C[0]
}

// Names selects an interface's names for the settings.
type Names int

// The interfaces.
const (
	GoNames   Names = iota // Config.HeartbeatPeriod = 1ns
	FlagNames              // -h 1ns
	EnvNames               // VIGIL_H=1ns
	CNames                 // vigil_config.heartbeat_ns = 1
)

// Name is s's name in interface n.
func (s *Setting) Name(n Names) string {
	switch n {
	case FlagNames:
		return "-" + s.Flag
	case EnvNames:
		return s.Env
	case CNames:
		return "vigil_config." + s.CName()
	}
	return s.GoName()
}

// show renders v (a duration, or an Int setting's value) as interface n
// writes it.
func (s *Setting) show(n Names, v time.Duration) string {
	val := v.String()
	if s.Kind == Int {
		val = strconv.FormatInt(int64(v), 10)
	}
	switch n {
	case FlagNames:
		return s.Name(n) + " " + val
	case EnvNames:
		return s.Name(n) + "=" + val
	case CNames:
		switch {
		case s.Kind == Int:
			return s.Name(n) + " = " + val
		case s.CUnit == "ms":
			return fmt.Sprintf("%s = %d (%v)", s.Name(n), v/time.Millisecond, v)
		}
		return fmt.Sprintf("%s = %d (%v)", s.Name(n), int64(v), v)
	}
	return s.Name(n) + " = " + val
}

// Has reports whether command (run, agent, demo, daemon) defines s's flag.
func (s *Setting) Has(command string) bool {
	for _, c := range s.Commands {
		if c == command {
			return true
		}
	}
	return false
}

// ByFlag returns the setting of command's flag name (nil if none).
func ByFlag(command, name string) *Setting {
	return find(func(s *Setting) bool { return s.Flag == name && s.Has(command) })
}

// ByEnv returns the setting of environment variable v (nil if none).
func ByEnv(v string) *Setting { return find(func(s *Setting) bool { return s.Env == v }) }

// ByC returns the setting of vigil_config's field f (nil if none).
func ByC(f string) *Setting { return find(func(s *Setting) bool { return slices.Contains(s.C, f) }) }

// ByGo returns the setting of the Go field f, package-qualified (nil if
// none).
func ByGo(f string) *Setting { return find(func(s *Setting) bool { return slices.Contains(s.Go, f) }) }

// find returns the first setting of All that match accepts, nil if none.
func find(match func(*Setting) bool) *Setting {
	if i := slices.IndexFunc(All, match); i >= 0 {
		return All[i]
	}
	return nil
}

// CheckChoice checks that v is one of s's Choices, naming s as interface
// n does ("-transport \"x\": want tcp or verbs").
func CheckChoice(s *Setting, n Names, v string) error {
	for _, c := range s.Choices {
		if v == c {
			return nil
		}
	}
	want := orList(s.Choices)
	if len(s.Choices) > 2 {
		want = "one of " + strings.Join(s.Choices, ", ")
	}
	sep := " "
	if n == EnvNames {
		sep = "="
	}
	return fmt.Errorf("%s%s%q: want %s", s.Name(n), sep, v, want)
}
