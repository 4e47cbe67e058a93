package main

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil"
	"github.com/vigil-hpc/vigil/daemon"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/settings"
)

// TestFlagsMatchSettings: every flag of run, agent, demo and daemon has
// its row in the settings table, with the row's usage and default, and
// every row naming a command's flag is defined by that command.
func TestFlagsMatchSettings(t *testing.T) {
	sets := map[string]*flag.FlagSet{}
	sets["run"], _ = runFlags()
	sets["agent"], _ = agentFlags()
	sets["demo"], _ = demoFlags()
	sets["daemon"], _ = daemonFlags()
	for cmd, fs := range sets {
		fs.VisitAll(func(f *flag.Flag) {
			s := settings.ByFlag(cmd, f.Name)
			switch {
			case s == nil:
				t.Errorf("vigil %s -%s: no row in the settings table", cmd, f.Name)
			case f.Usage == "" || !strings.HasPrefix(f.Usage, s.Doc):
				t.Errorf("vigil %s -%s: usage %q, the table's %q", cmd, f.Name, f.Usage, s.Doc)
			case f.DefValue != s.FlagDefault:
				t.Errorf("vigil %s -%s: default %q, the table's %q", cmd, f.Name, f.DefValue, s.FlagDefault)
			}
		})
	}
	for _, s := range settings.All {
		for _, cmd := range s.Commands {
			if fs := sets[cmd]; fs == nil || fs.Lookup(s.Flag) == nil {
				t.Errorf("settings row %s: vigil %s has no flag -%s", s.Key, cmd, s.Flag)
			}
		}
	}
}

// TestGoFieldsMatchSettings: every field of node.Config, vigil.Config and
// daemon.Config is a setting of the table (or holds settings of it, as
// vigil.Config.Addresses does), and every Go field the table names exists.
func TestGoFieldsMatchSettings(t *testing.T) {
	types := map[string]reflect.Type{
		"node.Config":   reflect.TypeFor[node.Config](),
		"vigil.Config":  reflect.TypeFor[vigil.Config](),
		"daemon.Config": reflect.TypeFor[daemon.Config](),
	}
	var named []string
	for _, s := range settings.All {
		named = append(named, s.Go...)
	}
	for name, ty := range types {
		for f := range ty.Fields() {
			if f.Anonymous || !f.IsExported() {
				continue
			}
			path := name + "." + f.Name
			found := false
			for _, g := range named {
				found = found || g == path || strings.HasPrefix(g, path+".")
			}
			if !found {
				t.Errorf("%s: no row in the settings table", path)
			}
		}
	}
	// The Go defaults: node's (WithDefaults) and vigil.DefaultConfig's, where
	// set, are the table's, where it states one value.
	for _, cfg := range []reflect.Value{
		reflect.ValueOf(node.Config{Size: 1}.WithDefaults()),
		reflect.ValueOf(vigil.DefaultConfig().Config),
		reflect.ValueOf(vigil.DefaultConfig()),
	} {
		prefix := "node.Config."
		if cfg.Type() == types["vigil.Config"] {
			prefix = "vigil.Config."
		}
		for _, s := range settings.All {
			for _, g := range s.Go {
				f, ok := strings.CutPrefix(g, prefix)
				if !ok || strings.Contains(f, ".") && !strings.HasPrefix(f, "Gossip.") {
					continue
				}
				v := cfg.FieldByName(f)
				if strings.HasPrefix(f, "Gossip.") {
					v = cfg.FieldByName("Gossip").FieldByName(strings.TrimPrefix(f, "Gossip."))
				}
				if !v.IsValid() || v.IsZero() {
					continue
				}
				var want any
				switch v.Interface().(type) {
				case time.Duration:
					d, err := time.ParseDuration(s.Default)
					if err != nil {
						continue
					}
					want = d
				case int:
					i, err := strconv.Atoi(s.Default)
					if err != nil {
						continue
					}
					want = i
				case string:
					want = s.Default
				default:
					continue
				}
				if got := v.Interface(); got != want {
					t.Errorf("%s: the Go default is %v, the settings table's %v", g, got, want)
				}
			}
		}
	}
	for _, g := range named {
		parts := strings.Split(g, ".")
		ty := types[parts[0]+"."+parts[1]]
		for _, p := range parts[2:] {
			f, ok := reflect.Type(nil), false
			if ty != nil && ty.Kind() == reflect.Struct {
				var sf reflect.StructField
				sf, ok = ty.FieldByName(p)
				f = sf.Type
			}
			if !ok {
				t.Errorf("settings table: Go field %s does not exist", g)
				break
			}
			ty = f
		}
	}
}

// TestFlagsOnlyFromSettings: no command defines a flag but through
// settingVar (settingflags.go), so that each flag's name, usage and
// default come from the settings table.
func TestFlagsOnlyFromSettings(t *testing.T) {
	define := regexp.MustCompile(`\bfs\.(Var|Func|BoolFunc|TextVar|(Int|Int64|Uint|Uint64|String|Bool|Float64|Duration)(Var)?)\(`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "settingflags.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if define.MatchString(line) && !strings.Contains(line, "durationValue{p}") {
				t.Errorf("%s:%d defines a flag outside settingVar: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
