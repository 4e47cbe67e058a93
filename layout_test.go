package vigil_test

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is the library module's path; lab is its tooling tree (lab/: the
// guest harness, the test launcher, test helpers, the Go IMB loads).
const (
	module = "github.com/vigil-hpc/vigil"
	lab    = module + "/lab"
)

// isLab reports whether the package path p is under lab/.
func isLab(p string) bool { return p == lab || strings.HasPrefix(p, lab+"/") }

// goList runs go list in the module's root with args and returns its
// output lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestProductImportsNoLab checks the import graph of the product's
// packages (every package of the module outside lab/), built untagged and
// with -tags pmix,verbs: none of them, nor anything they import, imports
// a lab package. Tests of product packages may use the lab (go list -deps
// without -test leaves them out).
func TestProductImportsNoLab(t *testing.T) {
	all := goList(t, "-f", "{{.ImportPath}}", "./...")
	var product, labPkgs []string
	for _, p := range all {
		if isLab(p) {
			labPkgs = append(labPkgs, p)
		} else {
			product = append(product, p)
		}
	}
	// The check means something only if both sides are where it looks.
	for _, want := range []string{module + "/cmd/vigil", module + "/capi", module + "/node"} {
		if !slices.Contains(product, want) {
			t.Fatalf("product package %s not listed by go list ./...: %v", want, product)
		}
	}
	if !slices.Contains(labPkgs, lab+"/mpitest") {
		t.Fatalf("lab package %s/mpitest not listed by go list ./...: %v", lab, labPkgs)
	}
	for _, tags := range []string{"", "pmix,verbs"} {
		args := append([]string{"-deps", "-tags", tags, "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}, product...)
		for _, line := range goList(t, args...) {
			f := strings.Fields(line)
			if len(f) == 0 || isLab(f[0]) {
				continue // a lab package is reported by its importer
			}
			for _, imp := range f[1:] {
				if isLab(imp) {
					t.Errorf("-tags %q: %s imports %s: product code must not depend on the lab", tags, f[0], imp)
				}
			}
		}
	}
}

// maxDocLines bounds a package comment: a package doc says what the
// package is and where to read more; designs, measurements and history go
// to docs/ and RESULTS files.
const maxDocLines = 48

// TestPackageDocsShort checks that no package comment of the module runs
// longer than maxDocLines lines.
func TestPackageDocsShort(t *testing.T) {
	fset := token.NewFileSet()
	n := 0
	for _, dir := range goList(t, "-f", "{{.Dir}}", "./...") {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if f.Doc == nil {
				continue
			}
			n++
			lines := fset.Position(f.Doc.End()).Line - fset.Position(f.Doc.Pos()).Line + 1
			if lines > maxDocLines {
				t.Errorf("%s: package comment of %d lines (at most %d): move the detail to docs/", name, lines, maxDocLines)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d package comments found", n)
	}
}
