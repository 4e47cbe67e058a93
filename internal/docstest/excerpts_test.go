package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEExcerpts checks the README's C and Go excerpts, which are not
// run, against the code they excerpt: every libvigil name of a c block is
// declared in csrc/vigil.h, and every name a go block takes from the vigil
// package, the detector d or an event ev appears so in
// examples/gowatch/main.go, the program the excerpt comes from.
func TestREADMEExcerpts(t *testing.T) {
	root := filepath.Join("..", "..")
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	doc, header, gowatch := read("README.md"), read("csrc/vigil.h"), read("examples/gowatch/main.go")
	fences := regexp.MustCompile("(?ms)^```(c|go)\n(.*?)^```$").FindAllStringSubmatch(doc, -1)
	seen := map[string]int{}
	for _, f := range fences {
		lang, code := f[1], f[2]
		seen[lang]++
		switch lang {
		case "c":
			for _, name := range regexp.MustCompile(`\b(?:vigil|VIGIL)_\w+`).FindAllString(code, -1) {
				if !regexp.MustCompile(`\b` + name + `\b`).MatchString(header) {
					t.Errorf("the README's C excerpt uses %s, which csrc/vigil.h does not declare", name)
				}
			}
		case "go":
			for _, name := range regexp.MustCompile(`\b(?:vigil|d|ev)\.\w+`).FindAllString(code, -1) {
				if !strings.Contains(gowatch, name) {
					t.Errorf("the README's Go excerpt uses %s, which examples/gowatch/main.go does not", name)
				}
			}
		}
	}
	if seen["c"] == 0 || seen["go"] == 0 {
		t.Fatalf("README.md has %d c and %d go excerpts: want at least one of each", seen["c"], seen["go"])
	}
}
