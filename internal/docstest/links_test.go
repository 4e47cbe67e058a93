package docstest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinks checks every relative link of README.md and docs/: the
// file it names exists, and so does the heading its #anchor names (as
// GitHub makes anchors from headings).
func TestDocsLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	linkRE := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, m := range linkRE.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
			}
			st, err := os.Stat(dest)
			if err != nil {
				t.Errorf("%s: link %q: %v", rel, target, err)
				continue
			}
			if anchor == "" {
				continue
			}
			if st.IsDir() || !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q: an anchor into something other than a Markdown file", rel, target)
				continue
			}
			if !hasAnchor(t, dest, anchor) {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", rel, target, path, anchor)
			}
		}
	}
}

// hasAnchor reports whether the Markdown file p has a heading whose
// GitHub anchor is anchor.
func hasAnchor(t *testing.T, p, anchor string) bool {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	inFence := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(l, "#") {
			continue
		}
		if slug(strings.TrimLeft(l, "# ")) == anchor {
			return true
		}
	}
	return false
}

// slug is GitHub's anchor for a heading: lower case, spaces to dashes,
// everything but letters, digits, marks, dashes and underscores dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
