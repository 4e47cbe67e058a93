package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/vigil-hpc/vigil/settings"
)

// settingVar defines the flag name of the command fs is named after from
// the settings table (settings.ByFlag): its usage is the row's Doc, its
// default the row's FlagDefault, parsed as p's type (*time.Duration,
// *int, *uint, *uint64, *bool, *string, or a flag.Value). A flag without
// a row, or a default that does not parse, is a programming error: it
// panics (TestFlagsMatchSettings runs every command's definitions).
func settingVar(fs *flag.FlagSet, name string, p any) {
	s := settings.ByFlag(fs.Name(), name)
	if s == nil {
		panic(fmt.Sprintf("vigil %s -%s: no row in the settings table", fs.Name(), name))
	}
	def := s.FlagDefault
	var err error
	switch p := p.(type) {
	case *time.Duration:
		var d time.Duration
		d, err = time.ParseDuration(def)
		durationVar(fs, p, name, d, s.Doc)
	case *int:
		var i int
		i, err = strconv.Atoi(def)
		fs.IntVar(p, name, i, s.Doc)
	case *uint:
		var u uint64
		u, err = strconv.ParseUint(def, 10, 0)
		fs.UintVar(p, name, uint(u), s.Doc)
	case *uint64:
		var u uint64
		u, err = strconv.ParseUint(def, 10, 64)
		fs.Uint64Var(p, name, u, s.Doc)
	case *bool:
		var b bool
		b, err = strconv.ParseBool(def)
		fs.BoolVar(p, name, b, s.Doc)
	case *string:
		fs.StringVar(p, name, def, s.Doc)
	case flag.Value:
		err = p.Set(def)
		fs.Var(p, name, s.Doc)
	default:
		err = fmt.Errorf("unsupported %T", p)
	}
	if err != nil {
		panic(fmt.Sprintf("vigil %s -%s: default %q: %v", fs.Name(), name, def, err))
	}
}
