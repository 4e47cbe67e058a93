package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/settings"
)

// readHeader returns csrc/vigil.h.
func readHeader(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../csrc/vigil.h")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCConfigMatchesSettings: every field of vigil.h's vigil_config is in
// the settings table (but struct_size and reserved0, the ABI's own),
// every C field of the table is in the struct, vigil_config_init sets
// only what the table's defaults say, and a default a field's comment
// states as a duration is the table's.
func TestCConfigMatchesSettings(t *testing.T) {
	h := readHeader(t)
	_, body, _ := strings.Cut(h, "typedef struct vigil_config {")
	body, _, ok := strings.Cut(body, "} vigil_config;")
	if !ok {
		t.Fatal("vigil.h: no vigil_config")
	}
	// Each declaration, with the comment that follows it up to the next
	// declaration.
	decl := regexp.MustCompile(`(?m)^\t([a-z][^;/]*);`)
	ident := regexp.MustCompile(`[a-z_][a-z0-9_]*`)
	locs := decl.FindAllStringSubmatchIndex(body, -1)
	fields := map[string]string{} // field → its comment text
	for i, l := range locs {
		end := len(body)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		comment := strings.Join(strings.Fields(body[l[1]:end]), " ")
		d := body[l[2]:l[3]]
		if j := strings.Index(d, ")("); j >= 0 { // a function pointer: (*name)(args)
			d = d[:j]
		}
		for k, part := range strings.Split(d, ",") {
			ids := ident.FindAllString(part, -1)
			if len(ids) > 0 && (k > 0 || len(ids) > 1) {
				fields[ids[len(ids)-1]] = comment
			}
		}
	}
	if len(fields) < 20 {
		t.Fatalf("vigil.h: read only %d fields of vigil_config: %v", len(fields), fields)
	}
	abi := map[string]bool{"struct_size": true, "reserved0": true}
	defaultRe := regexp.MustCompile(`default (\d+(?:\.\d+)?) ?(ns|us|ms|s|min)?\b`)
	for f, comment := range fields {
		s := settings.ByC(f)
		if abi[f] {
			continue
		}
		if s == nil {
			t.Errorf("vigil_config.%s: no row in the settings table", f)
			continue
		}
		m := defaultRe.FindStringSubmatch(comment)
		if m == nil || s.Kind != settings.Duration {
			continue
		}
		unit := m[2]
		if unit == "" {
			unit = s.CUnit
		}
		got, err1 := time.ParseDuration(m[1] + strings.Replace(unit, "min", "m", 1))
		want, err2 := time.ParseDuration(s.Default)
		if err1 == nil && err2 == nil && got != want {
			t.Errorf("vigil_config.%s: the header says default %s %s, the settings table %v", f, m[1], m[2], want)
		}
	}
	for _, s := range settings.All {
		for _, c := range s.C {
			if _, ok := fields[c]; !ok {
				t.Errorf("settings row %s: vigil_config has no field %s", s.Key, c)
			}
		}
	}
	_, initBody, _ := strings.Cut(h, "static inline void vigil_config_init(vigil_config *cfg)")
	initBody, _, _ = strings.Cut(initBody, "}")
	for _, m := range regexp.MustCompile(`cfg->([a-z_]+) = ([^;]+);`).FindAllStringSubmatch(initBody, -1) {
		if abi[m[1]] {
			continue
		}
		if s := settings.ByC(m[1]); s == nil || s.FlagDefault != m[2] {
			t.Errorf("vigil_config_init sets %s = %s, not the settings table's default", m[1], m[2])
		}
	}
}

// TestEnvMatchesSettings: the variables vigil.h lists for
// vigil_init_from_env are the table's libvigil variables; every VIGIL_*
// variable the product's Go code names, and every one the PMPI library
// reads, is in the table; and vigil_init_from_env refuses a bad value of
// each libvigil variable that is not free text, naming it (so each is
// read).
func TestEnvMatchesSettings(t *testing.T) {
	_, block, _ := strings.Cut(readHeader(t), "Detector settings come from:")
	block, _, _ = strings.Cut(block, "Returns VIGIL_OK")
	varRe := regexp.MustCompile(`VIGIL_[A-Z0-9_]*[A-Z0-9]`)
	listed := map[string]bool{}
	for _, v := range varRe.FindAllString(block, -1) {
		if !strings.HasPrefix(v, "VIGIL_EVENT_") && !strings.HasPrefix(v, "VIGIL_ERR_") {
			listed[v] = true
		}
	}
	for v := range listed {
		if s := settings.ByEnv(v); s == nil || s.EnvFor != settings.EnvLib {
			t.Errorf("vigil.h lists %s for vigil_init_from_env: not a libvigil variable of the settings table", v)
		}
	}
	for _, s := range settings.All {
		if s.EnvFor == settings.EnvLib && !listed[s.Env] {
			t.Errorf("settings row %s: vigil.h does not list %s for vigil_init_from_env", s.Key, s.Env)
		}
	}

	// The product's Go code (not the tests, not the lab) and the PMPI library.
	lab := []string{"../sim", "../bench", "../lab", "../internal/docstest",
		"../csrc"}
	named := map[string]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (slices.Contains(lab, path) || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				for _, v := range varRe.FindAllString(lit.Value, -1) {
					named[v] = path
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pmpi, err := os.ReadFile("../csrc/pmpi/vigil_pmpi.c")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`getenv\("(VIGIL_[A-Z0-9_]+)"\)`).FindAllStringSubmatch(string(pmpi), -1) {
		named[m[1]] = "csrc/pmpi/vigil_pmpi.c"
	}
	// The PMPI library's own duration defaults (0: libvigil's).
	for _, m := range regexp.MustCompile(`parse_ns\("(VIGIL_[A-Z0-9_]+)", [^,]+, (\d+)\)`).FindAllStringSubmatch(string(pmpi), -1) {
		ns, _ := strconv.ParseInt(m[2], 10, 64)
		s, d := settings.ByEnv(m[1]), time.Duration(ns)
		if s == nil || d == 0 {
			continue
		}
		if want, err := time.ParseDuration(s.Default); (err == nil && want != d) || (err != nil && !strings.Contains(s.Default, "PMPI library: "+d.String())) {
			t.Errorf("the PMPI library's default %s is %v, the settings table's %q", m[1], d, s.Default)
		}
	}
	// The C constants the headers define (status codes, modes, operations…).
	var consts []string
	for _, hdr := range []string{"../csrc/vigil.h", "../csrc/vigil_daemon.h"} {
		b, err := os.ReadFile(hdr)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^(?:#define|#ifn?def|\t)\s*(VIGIL_[A-Z0-9_]+)\b`).FindAllStringSubmatch(string(b), -1) {
			consts = append(consts, m[1])
		}
	}
	daemonH, err := os.ReadFile("../csrc/vigil_daemon.h")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range varRe.FindAllString(string(daemonH), -1) {
		named[v] = "csrc/vigil_daemon.h"
	}
	for v, path := range named {
		if slices.ContainsFunc(consts, func(c string) bool { return c == v || strings.HasPrefix(c, v+"_") }) {
			continue // a C constant named in a message
		}
		if settings.ByEnv(v) == nil {
			t.Errorf("%s names %s: no row in the settings table", path, v)
		}
	}
	if len(named) < 20 {
		t.Errorf("found only %d variables in the product's code: %v", len(named), named)
	}

	for _, s := range settings.All {
		if s.EnvFor != settings.EnvLib || s.Kind == settings.String {
			continue
		}
		for _, o := range settings.All {
			if o.EnvFor == settings.EnvLib {
				t.Setenv(o.Env, "")
			}
		}
		t.Setenv(s.Env, "1.5x")
		_, lerr := newLogger()
		err := envSettings(&instance{})
		if err == nil {
			err = lerr
		}
		if err == nil || !strings.Contains(err.Error(), s.Env) {
			t.Errorf("%s=1.5x: %v, want an error naming it", s.Env, err)
		}
	}
}
