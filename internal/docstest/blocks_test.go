package docstest

import (
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	doc := "# T\n\n<!-- docs-test: first -->\n```sh\necho one\n  echo two\n```\n\n```go\nx := 1\n```\n\n" +
		"Text.\n<!-- docs-test: second-2 pending=launch why=\"no Slurm here\" -->\n````sh\necho ```\n````\n"
	bs, err := Extract(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 {
		t.Fatalf("got %d blocks, want 2: %+v", len(bs), bs)
	}
	if b := bs[0]; b.Name != "first" || b.Text != "echo one\n  echo two\n" || b.Line != 4 || len(b.Attrs) != 0 {
		t.Errorf("first block: %+v", b)
	}
	if b := bs[1]; b.Name != "second-2" || b.Text != "echo ```\n" || b.Line != 15 ||
		b.Attrs["pending"] != "launch" || b.Attrs["why"] != "no Slurm here" || len(b.Attrs) != 2 {
		t.Errorf("second block: %+v", b)
	}
}

func TestExtractRejects(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unmarked sh", "```sh\nls\n```\n", "without a docs-test marker"},
		{"marker before go", "<!-- docs-test: a -->\n```go\n```\n", `want sh`},
		{"marker before text", "<!-- docs-test: a -->\ntext\n```sh\n```\n", "not followed by an sh block"},
		{"two markers", "<!-- docs-test: a -->\n<!-- docs-test: b -->\n```sh\n```\n", "not followed by an sh block"},
		{"marker at the end", "<!-- docs-test: a -->\n", "ends the document"},
		{"duplicate", "<!-- docs-test: a -->\n```sh\n```\n<!-- docs-test: a -->\n```sh\n```\n", "already marked at line 1"},
		{"bad name", "<!-- docs-test: A_b -->\n```sh\n```\n", "want a name"},
		{"bad attribute", "<!-- docs-test: a pending -->\n```sh\n```\n", "is not key=value"},
		{"unterminated quote", "<!-- docs-test: a why=\"x -->\n```sh\n```\n", "is not key=value"},
		{"attribute twice", "<!-- docs-test: a k=1 k=2 -->\n```sh\n```\n", "given twice"},
		{"open fence", "<!-- docs-test: a -->\n```sh\nls\n", "not closed"},
	} {
		_, err := Extract(tc.doc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

func FuzzExtract(f *testing.F) {
	f.Add("<!-- docs-test: a k=\"v w\" -->\n```sh\nls\n```\n")
	f.Add("```go\n```\n~~~\n~~~\n")
	f.Fuzz(func(t *testing.T, doc string) {
		bs, err := Extract(doc)
		if err != nil {
			return
		}
		names := map[string]bool{}
		for _, b := range bs {
			if names[b.Name] || !nameRE.MatchString(b.Name) || b.Line < 2 {
				t.Fatalf("bad block %+v", b)
			}
			names[b.Name] = true
		}
	})
}
